"""What memories.services promises every interface: one return convention, one package.
And the layering around it, the walls inside memories:

- The interfaces (mcp_bridge, oauth, dashboard, the admin, the management commands, the
  bench, taproot_site) import memories.services, memories.recall and
  memories.portability as packages, their one public faces, and no module inside them.
- Recall (memories/recall/: the index, ranking, scoring, the embedders) builds on the
  models and memories' shared modules: it imports nothing of the services, of
  portability, of the payload, or of an interface.
- Portability (memories/portability/: the importers, the export, the backups) builds on
  the models, recall and the shared modules: it imports nothing of the services (the
  import and snapshot services build on it) or of an interface.
- The models import none of the rooms (services, recall, portability).
- Nothing outside the services imports their private modules; no app imports the project
  package, taproot_site; memories imports no interface.
"""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from memories import services
from memories.models import ChangeSource, Memory, Revision, Salience, SuggestionKind
from tests.conftest import NOW

pytestmark = pytest.mark.django_db

# The interfaces: they call memories.services, memories.recall and memories.portability
# and nothing below them.
INTERFACES = (
    "mcp_bridge",
    "oauth",
    "dashboard",
    "memories/admin.py",
    "memories/management",
    "bench",
    "taproot_site",
)
ROOMS = ("memories.services", "memories.recall", "memories.portability")
INTERFACE_PACKAGES = ("mcp_bridge", "dashboard", "oauth", "bench", "taproot_site")


def _sources(place: str) -> list[Path]:
    path = Path(settings.BASE_DIR) / place
    return [path] if path.is_file() else sorted(path.rglob("*.py"))


def _imported_modules(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
    return modules


def _reaching(places: tuple[str, ...], into: tuple[str, ...]) -> list[str]:
    """Each import, in the sources of these places, of one of these modules or of anything
    inside them."""
    return [
        f"{path.relative_to(settings.BASE_DIR)}: {module}"
        for place in places
        for path in _sources(place)
        for module in _imported_modules(path)
        if any(module == room or module.startswith(f"{room}.") for room in into)
    ]


def _imported_names(path: Path) -> list[str]:
    """`package.name` for each `from package import name` of a room's package."""
    return [
        f"{node.module}.{alias.name}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module in ROOMS
        for alias in node.names
    ]


def test_the_interfaces_import_each_room_through_its_face_and_none_of_its_modules():
    reaching_in = [
        f"{path.relative_to(settings.BASE_DIR)}: {module}"
        for place in INTERFACES
        for path in _sources(place)
        for module in _imported_modules(path)
        if any(module.startswith(f"{room}.") for room in ROOMS)
    ]
    assert _sources("mcp_bridge")  # the walk finds the interfaces
    assert reaching_in == []


def test_what_the_interfaces_import_from_a_face_is_what_it_exports():
    # `from memories.recall import semantic` would reach a module through the face.
    faces = {room: set(importlib.import_module(room).__all__) for room in ROOMS}
    past_the_face = [
        f"{path.relative_to(settings.BASE_DIR)}: {name}"
        for place in INTERFACES
        for path in _sources(place)
        for name in _imported_names(path)
        if name.rpartition(".")[2] not in faces[name.rpartition(".")[0]]
    ]
    assert _imported_names(Path(settings.BASE_DIR) / "mcp_bridge" / "tools" / "remember.py")
    assert past_the_face == []


@pytest.mark.parametrize("room", ["memories.recall", "memories.portability"])
def test_a_face_gives_each_name_it_exports_from_the_module_that_defines_it(room):
    face = importlib.import_module(room)
    assert set(face.__all__) == set(face._HOMES)
    for name in face.__all__:
        home = importlib.import_module(f"{room}.{face._HOMES[name]}")
        assert getattr(face, name) is getattr(home, name)
    with pytest.raises(AttributeError):
        face.no_such_name  # noqa: B018


def test_the_pure_recall_modules_load_without_django():
    # The face imports on first use: ranking through it must not load the models.
    code = (
        "import sys; from memories.recall import parse_query, memory_text; "
        "assert 'memories.models' not in sys.modules and 'django.db.models' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=settings.BASE_DIR)


def test_recall_builds_on_the_models_and_imports_no_other_room():
    assert _sources("memories/recall")
    assert (
        _reaching(
            ("memories/recall",),
            (
                "memories.services",
                "memories.portability",
                "memories.payload",
                "memories.payload_entries",
                *INTERFACE_PACKAGES,
            ),
        )
        == []
    )


def test_portability_imports_no_service():
    assert _sources("memories/portability/importers")
    assert _reaching(("memories/portability",), ("memories.services", *INTERFACE_PACKAGES)) == []


def test_the_models_import_no_room():
    assert _sources("memories/models")
    assert _reaching(("memories/models",), ROOMS) == []


def test_nothing_outside_the_services_imports_their_private_modules():
    root = Path(settings.BASE_DIR)
    services_dir = root / "memories" / "services"
    private = [
        f"{path.relative_to(root)}: {module}"
        for place in (*INTERFACES, "memories", "tests", "taproot_site")
        for path in _sources(place)
        if services_dir not in path.parents
        for module in _imported_modules(path)
        if module.startswith("memories.services._")
    ]
    assert private == []


def test_no_app_imports_the_project_package():
    # taproot_site puts the apps together (settings, routes, the ASGI entry point); an
    # app that imported it would depend on the whole.
    upward = [
        f"{path.relative_to(settings.BASE_DIR)}: {module}"
        for place in ("memories", "mcp_bridge", "oauth", "dashboard", "bench")
        for path in _sources(place)
        for module in _imported_modules(path)
        if module == "taproot_site" or module.startswith("taproot_site.")
    ]
    assert _sources("oauth")  # the walk finds the apps
    assert upward == []


def test_the_core_imports_no_interface():
    # memories is the domain: the tools, the dashboard and OAuth build on it, never the
    # other way round, so nothing in it can speak an interface's language.
    upward = [
        f"{path.relative_to(settings.BASE_DIR)}: {module}"
        for path in _sources("memories")
        for module in _imported_modules(path)
        if module.split(".")[0] in ("mcp_bridge", "dashboard", "oauth")
    ]
    assert _sources("memories")
    assert upward == []


def test_no_string_in_the_services_names_a_tool():
    # A service says what happened as data; the tools name themselves in their own words.
    named = [
        f"{path.relative_to(settings.BASE_DIR)}: {node.value[:60]!r}"
        for path in _sources("memories/services")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "taproot_" in node.value
    ]
    assert named == []


def _restore_an_edit(user, memory):
    services.edit_gist(owner=user, memory_id=memory.pk, gist="By hand", source=ChangeSource.TOOL)
    revision = Revision.objects.get(memory=memory)
    restored = services.restore_revision(
        owner=user, revision_id=revision.pk, source=ChangeSource.TOOL
    )
    assert restored.revision == revision
    return restored.memory


# The writes the dashboard and the admin make that no tool makes.
WRITES = {
    "set_curation": lambda user, memory: services.set_curation(
        owner=user, memory_id=memory.pk, salience=Salience.LOW, source=ChangeSource.DASHBOARD
    ),
    "edit_gist": lambda user, memory: services.edit_gist(
        owner=user, memory_id=memory.pk, gist="By hand", source=ChangeSource.DASHBOARD
    ),
    "restore_revision": _restore_an_edit,
}


@pytest.mark.parametrize("write", list(WRITES))
def test_the_writes_only_people_make_return_the_memory_as_saved(user, make_memory, write):
    memory = make_memory(salience="high", core=True)
    returned = WRITES[write](user, memory)
    assert isinstance(returned, Memory)
    saved = Memory.objects.get(pk=memory.pk)
    assert returned.as_record() == saved.as_record()
    assert (returned.gist_hash, returned.last_touched_at) == (
        saved.gist_hash,
        saved.last_touched_at,
    )


def test_a_dismissal_says_whether_it_changed_anything(user, make_memory):
    memory = make_memory(core=True)
    kind = SuggestionKind.DEMOTE
    first = services.dismiss_suggestion(owner=user, memory_id=memory.pk, kind=kind, now=NOW)
    again = services.dismiss_suggestion(owner=user, memory_id=memory.pk, kind=kind, now=NOW)
    assert (first, again) == (True, False)
