"""English text for the reference models, from Debian packages only.

Two sources, both installed by scripts/setup_training.sh:
  dict-gcide      The Collaborative International Dictionary of English (Webster 1913 + WordNet)
  python3.11-doc  the Python documentation's reStructuredText sources (prose and code)

Documents are split into train and validation by a hash of their name, so the split does not depend
on the order files are listed in or on the machine.
"""
import gzip
import hashlib
import os
import re

GCIDE = "/usr/share/dictd/gcide.dict.dz"
PYTHON_DOCS = "/usr/share/doc/python3.11/html/_sources"


def _validation(name, fraction):
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:4], "little") < fraction * 2**32


def gcide_documents():
    """Dictionary entries grouped by headword letter pairs, as flowing text: pronunciation marks and
    source tags removed, the wrapped lines of a paragraph joined."""
    with gzip.open(GCIDE, "rt", encoding="utf-8", errors="replace") as f:
        raw = f.read()
    start = raw.find("Begin file 1 of 26")
    raw = raw[start:]
    entries = re.split(r"\n\n(?=\S)", raw)
    groups = {}
    for entry in entries:
        text = re.sub(r"\\[^\\\n]*\\", "", entry)
        text = re.sub(r"\[(1913 Webster|WordNet 1\.5|PJC|Century Dict\.|Webster 1913 Suppl\.)[^\]]*\]", "", text)
        paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
        text = "\n".join(p for p in paragraphs if p)
        if len(text) < 20 or text.startswith(("Begin file", "*")):
            continue
        key = text[:2].lower()
        groups.setdefault(key, []).append(text)
    for key in sorted(groups):
        yield "gcide/" + key, "\n\n".join(groups[key])


def python_doc_documents():
    for root, _, files in sorted(os.walk(PYTHON_DOCS)):
        for name in sorted(files):
            if not name.endswith(".rst.txt"):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            yield "pydoc/" + os.path.relpath(path, PYTHON_DOCS), text


def documents(split, validation_fraction=0.04):
    """(name, text) of every document of `split` ("train" or "validation")."""
    for name, text in list(gcide_documents()) + list(python_doc_documents()):
        if _validation(name, validation_fraction) == (split == "validation"):
            yield name, text


def words(texts, minimum=3, maximum=9):
    """Lower-case alphabetic words of the texts, for needle keys and MQAR keys."""
    found = set()
    for text in texts:
        found.update(w for w in re.findall(r"\b[a-z]+\b", text[:200000]) if minimum <= len(w) <= maximum)
    return sorted(found)


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="Writes held-out text for `kvsketch perplexity` and `retrieval`.")
    parser.add_argument("--validation-text", required=True, help="output file")
    parser.add_argument("--chars", type=int, default=300000, help="characters from each source")
    args = parser.parse_args()
    docs = list(documents("validation"))
    parts = []
    for source in ("pydoc/", "gcide/"):
        text = "\n\n".join(t for name, t in docs if name.startswith(source))
        parts.append(text[:args.chars])
    with open(args.validation_text, "w", encoding="utf-8") as f:
        f.write("\n\n".join(parts) + "\n")
