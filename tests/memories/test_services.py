"""What memories.services promises every interface: one return convention, one package.
And the layering around it: no app imports the project package, taproot_site."""

import ast
from pathlib import Path

import pytest
from django.conf import settings

from memories import services
from memories.models import ChangeSource, Memory, Revision, Salience, SuggestionKind
from tests.conftest import NOW

pytestmark = pytest.mark.django_db

# The interfaces: they call memories.services and nothing below it.
INTERFACES = (
    "mcp_bridge",
    "oauth",
    "dashboard",
    "memories/admin.py",
    "memories/management",
    "bench",
)


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


def test_the_interfaces_import_the_services_package_and_none_of_its_modules():
    reaching_in = [
        f"{path.relative_to(settings.BASE_DIR)}: {module}"
        for place in INTERFACES
        for path in _sources(place)
        for module in _imported_modules(path)
        if module.startswith("memories.services.")
    ]
    assert _sources("mcp_bridge")  # the walk finds the interfaces
    assert reaching_in == []


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
