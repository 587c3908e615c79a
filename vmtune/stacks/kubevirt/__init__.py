"""KubeVirt: VirtualMachine manifests and the instancetypes and preferences they name. The front
end's declaration (vmtune.stacks.registry); its parts: detect.py, frontend.py, knobs_rows.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vmtune.errors import VmtuneError
from vmtune.stacks.registry import FrontEnd

if TYPE_CHECKING:
    from vmtune.stacks.frontend import StackFile


class Settings:
    """What the command line tells the KubeVirt front end: the release to follow
    (--kubevirt-version) and files that only resolve references (--instancetypes)."""

    __slots__ = ("companions", "elsewhere", "graphs", "isolated", "problems", "references", "runs", "searched",
                 "version")

    def __init__(self, version: str | None = None, references: list[StackFile] | None = None,
                 isolated: bool = False) -> None:
        self.version = version
        self.references: list[StackFile] = references or []
        self.isolated = isolated  # --isolated: git reads nothing of a work tree's .git (vmtune.sources.gitignored)
        # the work trees searched for references no file given holds (frontend._search_work_trees),
        # kept for the renderings --fix makes again: work tree -> (names looked for, search, files)
        self.searched: dict[str, Any] = {}
        # the names of the run's files rendered apart, in workers (vmtune.stacks.frontend.StackContext.read_elsewhere):
        # read already, so a search skips them as it skips the files given
        self.elsewhere: set[str] = set()
        # kustomize (vmtune.stacks.kubevirt.kustomize): the files a build reads that no file given
        # is, by absolute path (a fix may edit them: frontend.companions), and each work tree's
        # kustomizations, walked once a run
        self.companions: dict[str, StackFile] = {}
        self.graphs: dict[str, dict[str, set[str]]] = {}
        # a kustomization or chart refused or failed to build, a file the renderer refuses: said
        # (vmtune.stacks.frontend._taken_problems), while the other files go on
        self.problems: list[VmtuneError] = []
        # the builds and renderings run so far, when the first began, and those left unrun
        # (vmtune.stacks.kubevirt.kustomize.spend: a run's tools are bounded in number and time)
        self.runs: list[float] = [0, 0.0, 0]


def settings(request: Any) -> Settings:
    if request.kubevirt_version:  # a release vmtune has no bundle of is an error of the run (exit 2)
        from vmtune.stacks.kubevirt import common

        common.release_tag(request.kubevirt_version)
    return Settings(request.kubevirt_version, _references(request.instancetypes), request.isolated)


def _references(paths: list[str]) -> list[StackFile]:
    """Files named by --instancetypes (a file or a directory's *.yaml): they resolve references.
    A directory with a kustomization.yaml (a checkout of kubevirt/common-instancetypes) is read
    as kustomize builds it (vmtune.stacks.kubevirt.reflayout): one file holding what it makes."""
    import os

    from vmtune.sources import iter_sources
    from vmtune.stacks.frontend import StackFile, read_file
    from vmtune.stacks.kubevirt import reflayout
    from vmtune.stacks.kubevirt.kustomize import kustomization_in

    files = []
    plain = []
    for path in paths:
        if path != "-" and os.path.isdir(path) and kustomization_in(path):
            from vmtune.stacks.kubevirt.objects import find

            built = StackFile(f"{path} (its kustomization, built as kustomize would)", b"", [], explicit=False)
            built.found["kubevirt"] = find(reflayout.build(path))
            files.append(built)
        else:
            plain.append(path)
    for source in iter_sources(plain, walked=FRONTEND.walked):
        if not source.name.lower().endswith((*FRONTEND.walked, *FRONTEND.named)):
            continue
        data, _identity = source.load(for_write=False)
        files.append(read_file(source.name, data, explicit=False))
    return files


FRONTEND = FrontEnd("kubevirt", title="KubeVirt", stack_title="KubeVirt", walked=(".yaml", ".yml"),
                    named=(".json",), knobs="knobs_rows", settings=settings,
                    notes={"STK001": ("frontend._render_one", "objects._template_params", "instancetypes.apply"),
                           "STK002": ("frontend._render_one", "objects._template_params"),
                           "STK003": ("frontend._unknown_fields",),
                           "STK004": ("instancetypes._apply_preference", "instancetypes._hyperv_both")},
                    templates=True)
