"""The documentation against the code: README.md (the front door) and the MkDocs site in docs/.

The README stays under 200 lines and keeps the two commands (set up and run the main job; run the tests, which
.ci/run runs as written) and a training example that runs. Every public top-level package or module of ggrad
has an API reference page that names it; every `ggrad.` name and every repository path the pages give exists;
and, where MkDocs is installed, the site builds with --strict (broken links, missing pages or anchors fail).
"""

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
FIGURES = DOCS / "benchmark-figures"   # a link to benchmarks/: its README is checked by the site build only

SET_UP = "python3 -m venv .venv && . .venv/bin/activate && scripts/install.sh && python examples/char_gpt.py"
TESTS = "python -m pytest -q"

NAME = re.compile(r"(?<![\w./-])ggrad(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])(?:ggrad|tests|benchmarks|scripts|examples|docs|\.ci)/[\w./-]*")


def _pages():
    return sorted(p for p in DOCS.rglob("*.md") if FIGURES not in p.parents)


def _code_blocks(text):
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)


def _public_top_level():
    """ggrad's public packages and modules, from the source tree (no import)."""
    names = [p.name for p in (ROOT / "ggrad").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    names += [p.stem for p in (ROOT / "ggrad").glob("*.py") if p.stem != "__init__"]
    return sorted(n for n in names if not n.startswith("_"))


def _resolves(dotted):
    """Whether `ggrad.a.b...` is an attribute chain or a module path of ggrad. A module that cannot be imported
    for want of an optional package (ggrad.utils.tensorboard) is read instead: each remaining name must be
    defined or imported in its source."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i in range(1, len(parts)):
        if hasattr(obj, parts[i]):
            obj = getattr(obj, parts[i])
            continue
        module = ".".join(parts[:i + 1])
        spec = importlib.util.find_spec(module) if isinstance(obj, type(os)) else None
        if spec is None:
            return False
        try:
            obj = importlib.import_module(module)
        except ImportError:
            source = Path(spec.origin).read_text()
            return all(re.search(rf"\b{re.escape(name)}\b", source) for name in parts[i + 1:])
    return True


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move the detail into a page of docs/"


def test_readme_keeps_the_two_commands():
    blocks = [b.strip() for b in _code_blocks(README.read_text())]
    assert SET_UP in blocks, "README.md lost its set-up command (its own code block)"
    assert TESTS in blocks, "README.md lost its test command (its own code block)"


def test_ci_runs_the_readme_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    assert TESTS.replace("python", '"${VENV}/bin/python"', 1) in ci, ".ci/run no longer runs the README's tests"
    assert "scripts/install.sh" in ci, ".ci/run no longer installs as the README says"
    assert "mkdocs\" build --strict" in ci, ".ci/run no longer builds the site with --strict"


def test_readme_training_example_trains():
    text = README.read_text()
    section = text.split("## A training example", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, timeout=300, env=env,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    accuracy = float(re.search(r"accuracy ([0-9.]+)", proc.stdout).group(1))
    assert accuracy > 0.9, proc.stdout


@pytest.mark.parametrize("name", _public_top_level())
def test_every_public_package_has_a_reference_page(name):
    mention = re.compile(rf"(?<![\w.])ggrad\.{re.escape(name)}\b")
    pages = [p.relative_to(DOCS) for p in REFERENCE.glob("*.md") if mention.search(p.read_text())]
    assert pages, f"no page of docs/reference/ names ggrad.{name}: add it to the API reference"


def test_every_ggrad_name_in_the_docs_exists():
    names = {}
    for page in _pages() + [README]:
        for name in NAME.findall(page.read_text()):
            if not name.endswith(".md"):   # a link to the reference page docs/reference/ggrad.md
                names.setdefault(name, page.relative_to(ROOT))
    missing = sorted(f"{name} ({page})" for name, page in names.items() if not _resolves(name))
    assert not missing, f"the docs name what ggrad does not have: {missing}"


def test_every_repository_path_in_the_docs_exists():
    paths = {}
    for page in _pages() + [README]:
        for path in PATH.findall(page.read_text()):
            paths.setdefault(path.rstrip("."), page.relative_to(ROOT))
    missing = sorted(f"{path} ({page})" for path, page in paths.items() if not (ROOT / path).exists())
    assert not missing, f"the docs give paths that are not in the repository: {missing}"


def test_readme_links_exist():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert not missing, f"README.md links to files that are not there: {missing}"


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="MkDocs is the `docs` extra: pip install -e '.[docs]'")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
