"""Stack front ends register themselves (vmtune.stacks.registry): the shared stack layer names no
stack, and a stack is added by a folder and one line in registry.PACKAGES."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import vmtune
from vmtune.stacks.registry import PACKAGES, frontends

PACKAGE = Path(vmtune.__file__).parent
ROOT = PACKAGE.parent
# The shared stack layer: what every front end uses and none owns.
SHARED = ("stacks/frontend.py", "stacks/knob_table.py", "stacks/registry.py", "stacks/yamldoc.py", "stacks/yamledit.py",
          "stacks/__init__.py")


def _words(path: Path) -> list[tuple[int, str]]:
    """The names and string constants of a module's code, lower case, with their lines: not its
    docstrings and comments (which may give a stack as an example), not registry.PACKAGES (the
    one line that lists the front ends)."""
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            skipped.add(id(body[0].value))  # a docstring
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "PACKAGES" for t in targets):
                skipped.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value.lower()))
        elif isinstance(node, ast.Name):
            found.append((node.lineno, node.id.lower()))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr.lower()))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [(node.lineno, m.lower()) for m in modules]
    return found


def _stack_words() -> set[str]:
    """Every registered front end's names: its stack, package, titles, and the suffixes only it reads."""
    words: set[str] = set()
    for declared in frontends():
        words |= {declared.name, declared.package.rpartition(".")[2], declared.title.lower(),
                  declared.stack_title.lower()}
        others = {s for f in frontends() if f is not declared for s in (*f.walked, *f.named)}
        words |= {s for s in (*declared.walked, *declared.named, *declared.own_format) if s not in others}
    return words


def test_the_shared_stack_layer_names_no_stack() -> None:
    words = _stack_words()
    assert {"kubevirt", "nova", "openstack", "terraform", ".conf", ".tf"} <= words  # what is looked for
    named = [f"vmtune/{rel}:{line}: {text!r}" for rel in SHARED for line, text in _words(PACKAGE / rel)
             if any(word in text for word in words)]
    assert not named, "\n".join(named)


def test_a_stack_named_in_the_shared_layer_is_found(tmp_path: Path) -> None:
    """The test above can fail: routing by a front end's suffix or name, written as the shared
    layer did before the registry, is found; a docstring naming one is not."""
    sample = tmp_path / "shared.py"
    sample.write_text('"""Reads nova.conf."""\n\n'
                      'def read(name):\n    """A .conf file."""\n'
                      '    if name.endswith(".conf"):\n'
                      '        from vmtune.stacks.openstack.novaconf import set_options\n'
                      '    return {"kubevirt": "KubeVirt"}\n')
    words = _stack_words()
    hits = sorted({line for line, text in _words(sample) if any(w in text for w in words)})
    assert hits == [5, 6, 7]


FAKE_INIT = '''
from vmtune.stacks.registry import FrontEnd

FRONTEND = FrontEnd("fakestack", title="Fake", stack_title="Fake", walked=(".vmdef",), named=(),
                    own_format=(".vmdef",))
'''
FAKE_DETECT = '''
def wants(data, name):
    return name.endswith(".vmdef") and b"<domain" in data
'''
FAKE_FRONTEND = '''
from vmtune.stacks.frontend import Placement, Rendered

def render(files, settings):
    rendered = []
    for f in files:
        def place(code, element, domain, source=f.name):
            return Placement(source, 1, "whole-file", f"rewrite the definition for {code}", knob=False)
        rendered.append(Rendered(f"fake/{f.name}", f.data, f.name, 1, "fakestack", "fake 1", place))
    return rendered, {f.name for f in files}
'''


def test_a_stack_is_a_folder_and_one_line(tmp_path: Path) -> None:
    """A front end the shared layer has never heard of, in a folder of its own, registered by
    appending its package to PACKAGES: `vmtune check` walks its files, renders, checks and places
    the findings on them, in its words, and names it when a file holds no definition."""
    package = tmp_path / "plugins" / "fakestack"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_INIT)
    (package / "detect.py").write_text(FAKE_DETECT)
    (package / "frontend.py").write_text(FAKE_FRONTEND)
    work = tmp_path / "work"
    work.mkdir()
    (work / "web.vmdef").write_bytes((ROOT / "fixtures" / "domains" / "nginx-single-queue.xml").read_bytes())
    (work / "notes.vmdef").write_text("nothing here\n")
    runner = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from vmtune.stacks import registry; "
              "registry.PACKAGES.append('fakestack'); from vmtune.main import main; main()")

    def vmtune_with_fake(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", runner, str(tmp_path / "plugins"), *args], cwd=work,
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "NO_COLOR": "1"})

    walked = vmtune_with_fake("check", "--isolated", ".")
    assert walked.returncode == 1, walked  # no knob: the note says so, the severity stays (#48)
    assert "web.vmdef:1: NET001 warning virtio NIC has one queue for 16 vCPUs" in walked.stdout, walked.stdout
    assert "rewrite the definition for NET001 (no Fake knob)" in walked.stdout
    assert "notes.vmdef" not in walked.stdout + walked.stderr  # a walk's file the front end does not want: quiet
    named = vmtune_with_fake("check", "--isolated", "notes.vmdef")
    assert named.returncode == 2
    assert named.stderr == ("vmtune: notes.vmdef: no KubeVirt, OpenStack, Terraform or Fake definition in it "
                            "(--skip-non-domain skips such files)\n")
    without = subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", "."], cwd=work,
                             capture_output=True, text=True, timeout=60)
    # unregistered: its files are not walked
    assert (without.returncode, without.stdout.splitlines()[0]) == (0, ".: skipped: no *.xml file to check in it")


def test_every_registered_front_end_has_its_parts() -> None:
    """Each package in PACKAGES declares FRONTEND and has detect.wants and frontend.render; its knob
    table and editor, when declared, exist."""
    assert [f.package for f in frontends()] == PACKAGES
    for declared in frontends():
        assert callable(declared.part("detect").wants)
        assert callable(declared.part("frontend").render)
        if declared.knobs is not None:
            table = declared.part(declared.knobs)
            assert table.ROWS and isinstance(table.NO_KNOB, dict)
        if declared.editor is not None:
            assert callable(declared.part(declared.editor).set_paths)
    assert len({f.name for f in frontends()}) == len(PACKAGES)


def test_the_declarations_do_not_load_a_renderer() -> None:
    """Reading every declaration (as a directory walk does) imports no front end's parts."""
    probe = textwrap.dedent("""
        import sys
        from vmtune.stacks.registry import frontends, walked_suffixes
        walked_suffixes()
        print(sorted(m for m in sys.modules if m.startswith("vmtune.stacks.")))
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(sorted(["vmtune.stacks.registry", *PACKAGES]))


def _codes_made(package: str) -> dict[str, set[str]]:
    """rule code -> "module.function" of each function of a front end's package that names a STK
    rule's code as a value (the code of a Note it makes), read from the source."""
    import re

    made: dict[str, set[str]] = {}
    folder = ROOT / package.replace(".", "/")
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        re.fullmatch(r"STK\d{3}", node.value):
                    made.setdefault(node.value, set()).add(f"{path.stem}.{function.name}")
    return made


def test_each_front_end_declares_where_it_makes_each_stack_finding() -> None:
    """`vmtune rule STK003` points at the functions that make it (FrontEnd.notes): every function
    that makes a STK code is declared for it, and every declared function makes it."""
    for declared in frontends():
        made = _codes_made(declared.package)
        declared_places = {code: set(places) for code, places in declared.notes.items()}
        assert made == declared_places, (declared.name, made, declared_places)
        for places in declared.notes.values():
            for place in places:
                module, _dot, function = place.rpartition(".")
                assert callable(getattr(declared.part(module), function)), place
    assert _codes_made("vmtune.stacks.kubevirt")["STK003"] == {"frontend._unknown_fields"}  # the reader finds them


def test_vmtune_rule_shows_each_stacks_knob_and_where_it_is_detected() -> None:
    def rule(code: str) -> str:
        done = subprocess.run([sys.executable, "-m", "vmtune", "rule", code], capture_output=True, text=True,
                              timeout=60, check=True)
        return done.stdout

    stk003 = rule("STK003")
    assert ("## Where it is detected\n"
            "- KubeVirt: `vmtune/stacks/kubevirt/frontend.py` _unknown_fields()\n"
            "- OpenStack: `vmtune/stacks/openstack/frontend.py` key_notes()\n"
            "- Terraform: `vmtune/stacks/terraform/frontend.py` _render_one()\n") in stk003
    clk002 = rule("CLK002")
    section = clk002[clk002.index("## In the stacks\n"):clk002.index("## References")]
    assert section.startswith("## In the stacks\n- KubeVirt (`vmtune/stacks/kubevirt/knobs_rows.py`): "
                              "spec.domain.features.hyperv: {synic: {}, synictimer: {}, vpindex: {}}")
    assert "; or preference spec.features.preferredHyperv:" in section
    assert "\n- nova (`vmtune/stacks/openstack/knobs_rows.py`): no knob: nova never writes Hyper-V stimer" in section
    assert section.rstrip().endswith("(said on the image, at os_type)")
    assert "## In the stacks" not in rule("SUP001")  # no stack has a row for it: no section
