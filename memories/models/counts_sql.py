"""The triggers that keep StoreCount (memories.models.counts) in step with the memory
table, for SQLite and PostgreSQL. Each row written moves its key's count in the same
statement: an insert adds one, a delete takes one, an update that moves a memory to
another key (category, tier, salience, live or archived) does both."""

MEMORY = "memories_memory"
COUNTS = "memories_storecount"
KEY = "owner_id, category, core, salience, archived"


def _key_of(row: str) -> str:
    return (
        f"{row}.owner_id, {row}.category, {row}.core, {row}.salience, {row}.archived_at IS NOT NULL"
    )


def _add(row: str, excluded: str) -> str:
    return (
        f"INSERT INTO {COUNTS} ({KEY}, n) VALUES ({_key_of(row)}, 1)"
        f" ON CONFLICT ({KEY}) DO UPDATE SET n = {excluded}.n + 1"
    )


def _take(row: str) -> str:
    return (
        f"UPDATE {COUNTS} SET n = n - 1 WHERE owner_id = {row}.owner_id"
        f" AND category = {row}.category AND core = {row}.core"
        f" AND salience = {row}.salience AND archived = ({row}.archived_at IS NOT NULL)"
    )


def _moved(differs: str) -> str:
    old, new = _key_of("OLD").split(", "), _key_of("NEW").split(", ")
    return " OR ".join(f"({o}) {differs} ({n})" for o, n in zip(old, new, strict=True))


SQLITE_CREATE = [
    f"CREATE TRIGGER storecount_insert AFTER INSERT ON {MEMORY} BEGIN {_add('NEW', COUNTS)}; END",
    f"CREATE TRIGGER storecount_delete AFTER DELETE ON {MEMORY} BEGIN {_take('OLD')}; END",
    f"CREATE TRIGGER storecount_update AFTER UPDATE OF owner_id, category, core, salience,"
    f" archived_at ON {MEMORY} WHEN {_moved('IS NOT')}"
    f" BEGIN {_take('OLD')}; {_add('NEW', COUNTS)}; END",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS storecount_insert",
    "DROP TRIGGER IF EXISTS storecount_delete",
    "DROP TRIGGER IF EXISTS storecount_update",
]

# The functions the triggers call (a restore drops them with the tables).
FUNCTIONS = ("storecount_apply()",)

POSTGRES_CREATE = [
    f"""CREATE FUNCTION storecount_apply() RETURNS trigger AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        {_take("OLD")};
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        {_add("NEW", COUNTS)};
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql""",
    f"CREATE TRIGGER storecount_insert_delete AFTER INSERT OR DELETE ON {MEMORY}"
    " FOR EACH ROW EXECUTE FUNCTION storecount_apply()",
    f"CREATE TRIGGER storecount_update AFTER UPDATE OF owner_id, category, core, salience,"
    f" archived_at ON {MEMORY} FOR EACH ROW WHEN ({_moved('IS DISTINCT FROM')})"
    " EXECUTE FUNCTION storecount_apply()",
]
POSTGRES_DROP = [
    f"DROP TRIGGER IF EXISTS storecount_insert_delete ON {MEMORY}",
    f"DROP TRIGGER IF EXISTS storecount_update ON {MEMORY}",
    "DROP FUNCTION IF EXISTS storecount_apply()",
]

# Every count made again from the rows (the migration, and the repair).
RECOUNT = [
    f"DELETE FROM {COUNTS}",
    f"INSERT INTO {COUNTS} ({KEY}, n) SELECT owner_id, category, core, salience,"
    f" archived_at IS NOT NULL, count(*) FROM {MEMORY}"
    " GROUP BY owner_id, category, core, salience, archived_at IS NOT NULL",
]


def create_statements(vendor: str) -> list[str]:
    return POSTGRES_CREATE if vendor == "postgresql" else SQLITE_CREATE


def drop_statements(vendor: str) -> list[str]:
    return POSTGRES_DROP if vendor == "postgresql" else SQLITE_DROP
