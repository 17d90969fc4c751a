"""The profile summary sums py-spy's samples into the costs a call is made of."""

from bench.profiling import cost_of, summarise

SERVING = "_run_module_as_main (<frozen runpy>:198);Server.run (uvicorn/server.py:67)"
THREAD = "Thread.run (threading.py:1012);_worker (concurrent/futures/thread.py:93)"
IN_CALL = f"{THREAD};in_database_thread (mcp_bridge/database.py:78)"


def stack(*frames: str) -> list[str]:
    return ";".join(frames).split(";")


def test_a_sample_belongs_to_the_first_cost_its_stack_names():
    token = stack(IN_CALL, "find_access_token (mcp_bridge/auth.py:150)", "execute (x.py:1)")
    assert cost_of(token) == "bearer-token lookup"
    strengthening = stack(
        IN_CALL,
        "recall (memories/services/recall.py:300)",
        "strengthen (memories/services/strengthening.py:30)",
        "Atomic.__exit__ (django/db/transaction.py:235)",
    )
    assert cost_of(strengthening) == "strengthening write"
    reply = stack(IN_CALL, "recall (memories/services/recall.py:290)", "dumps (json/__init__.py:1)")
    assert cost_of(reply) == "recall: loading the memories and the reply"


def test_samples_no_mark_claims_go_by_the_library_nearest_their_innermost_frame():
    validation = stack(SERVING, "Tool.run (mcp/server/x.py:3)", "validate (pydantic/main.py:9)")
    assert cost_of(validation) == "pydantic"
    dispatch = stack(SERVING, "Tool.run (mcp/server/mcpserver/tools/base.py:132)")
    assert cost_of(dispatch) == "MCP SDK"
    hand_off = stack(SERVING, "_write_to_self (asyncio/selector_events.py:152)")
    assert cost_of(hand_off) == "event loop and thread hand-offs"
    parsing = stack(
        SERVING,
        "H11Protocol.handle_events (uvicorn/protocols/http/h11_impl.py:410)",
        "ABCMeta.__instancecheck__ (<frozen abc>:119)",
    )
    assert cost_of(parsing) == "HTTP server (uvicorn, h11)"
    assert cost_of(["mystery (somewhere.py:1)"]) == "other"


def test_waiting_threads_and_start_up_are_left_out():
    assert cost_of(stack(SERVING, "EpollSelector.select (selectors.py:452)")) is None
    assert cost_of(stack(THREAD)) is None
    assert cost_of(stack(SERVING, "Config.load_app (uvicorn/config.py:434)", "x (y.py:1)")) is None


def test_the_summary_gives_each_costs_share_of_the_busy_samples():
    collapsed = "\n".join(
        [
            f"{IN_CALL};strengthen (memories/services/strengthening.py:30) 30",
            f"{SERVING};Tool.run (mcp/server/mcpserver/tools/base.py:132) 50",
            f"{SERVING};validate (pydantic/main.py:9) 20",
            f"{SERVING};EpollSelector.select (selectors.py:452) 400",
        ]
    )
    assert summarise(collapsed) == {
        "samples": 100,
        "costs": [["MCP SDK", 50.0], ["strengthening write", 30.0], ["pydantic", 20.0]],
    }
    assert summarise("") == {"samples": 0, "costs": []}
