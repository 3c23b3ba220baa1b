"""Resource subscriptions with the official Python SDK: a client subscribed to a category or a
session hears `notifications/resources/updated` when another process changes it.

Both protocol generations: `resources/subscribe` / `resources/unsubscribe` on a handshake
connection (2025-11-25), and `subscriptions/listen` on a 2026-07-28 connection (the SDK's
`Client.listen`). The writes come from the CLI, a separate process, and from a hand edit of the
category's file, so the server cannot learn of them from its own calls. What may not change
(a version, a chunk, the status) is refused, and a category the ACL hides cannot be subscribed
to.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client

from mcp.shared.subscriptions import ResourceUpdated

from conftest import CALL_TIMEOUT_S, MEMDIR_BIN, server_env
from test_http import http_server  # noqa: F401  (the fixture)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(120),
    # resources/subscribe is what a 2025-era connection has; the SDK warns it is gone in 2026-07-28.
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]

# The watcher polls every 250 ms; a notification is due well within this.
WAIT_S = 10.0
# How long a test listens to be sure nothing arrives.
QUIET_S = 1.5


def cli(store: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(
        [str(MEMDIR_BIN), *args, "--json"],
        env=server_env(store),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture
def seeded(tmp_path: Path, memdir_bin: Path) -> Path:
    store = tmp_path / "store"
    cli(store, "init")
    cli(store, "write", "prefs", "--data", '{"editor": "vim"}')
    cli(store, "write", "other", "--data", '{"k": 1}')
    cli(store, "ingest", "--session-id", "s1", "--text", "the first turn")
    return store


class Updates:
    """The URIs of `notifications/resources/updated` a session received, as they come."""

    def __init__(self) -> None:
        self.send, self.recv = anyio.create_memory_object_stream[str](100)

    async def handler(self, message) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            await self.send.send(str(root.params.uri))

    async def next(self) -> str:
        with anyio.fail_after(WAIT_S):
            return await self.recv.receive()

    async def none(self) -> None:
        with anyio.move_on_after(QUIET_S):
            uri = await self.recv.receive()
            raise AssertionError(f"an update nobody subscribed to arrived: {uri}")


def params(store: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(command=str(MEMDIR_BIN), args=["serve"], env=server_env(store, **env))


async def test_a_subscribed_category_and_session_are_announced_when_another_process_writes(seeded):
    updates = Updates()
    async with stdio_client(params(seeded)) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S, message_handler=updates.handler) as s:
            init = await s.initialize()
            assert init.capabilities.resources is not None and init.capabilities.resources.subscribe is True
            await s.subscribe_resource("memdir://categories/prefs")
            await s.subscribe_resource("memdir://sessions/s1")
            await updates.none()  # subscribing announces nothing by itself

            cli(seeded, "write", "prefs", "--data", '{"editor": "helix"}', "--merge")
            assert await updates.next() == "memdir://categories/prefs"
            # A category nobody subscribed to changes silently.
            cli(seeded, "write", "other", "--data", '{"k": 2}')
            await updates.none()

            cli(seeded, "ingest", "--session-id", "s1", "--text", "a second turn")
            assert await updates.next() == "memdir://sessions/s1"

            # A hand edit of the file is a change too (the files are the truth).
            path = seeded / "categories" / "prefs.json"
            doc = json.loads(path.read_text())
            doc["theme"] = "dark"
            path.write_text(json.dumps(doc, indent=2) + "\n")
            assert await updates.next() == "memdir://categories/prefs"
            # After the announcement, reading the resource shows the change.
            read_back = await s.read_resource("memdir://categories/prefs")
            assert json.loads(read_back.contents[0].text)["theme"] == "dark"

            # A delete is announced; after unsubscribing nothing more is.
            cli(seeded, "delete", "prefs")
            assert await updates.next() == "memdir://categories/prefs"
            await s.unsubscribe_resource("memdir://categories/prefs")
            await s.unsubscribe_resource("memdir://sessions/s1")
            cli(seeded, "write", "prefs", "--data", '{"editor": "nano"}')
            cli(seeded, "ingest", "--session-id", "s1", "--text", "a third turn")
            await updates.none()

            # Subscribing again works (a new watcher task starts).
            await s.subscribe_resource("memdir://categories/prefs")
            cli(seeded, "write", "prefs", "--data", '{"editor": "emacs"}')
            assert await updates.next() == "memdir://categories/prefs"


async def test_a_category_created_after_subscribing_is_announced(seeded):
    updates = Updates()
    async with stdio_client(params(seeded)) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S, message_handler=updates.handler) as s:
            await s.initialize()
            await s.subscribe_resource("memdir://categories/later")
            await s.subscribe_resource("memdir://sessions/new%20one")
            cli(seeded, "write", "later", "--data", '{"a": 1}')
            assert await updates.next() == "memdir://categories/later"
            cli(seeded, "ingest", "--session-id", "new one", "--text", "hello")
            assert await updates.next() == "memdir://sessions/new%20one"


@pytest.mark.parametrize(
    "uri",
    [
        "memdir://status",
        "memdir://categories/prefs/versions/1",
        "memdir://sessions/s1/0",
        "memdir://nothing/here",
        "file:///etc/passwd",
    ],
)
async def test_what_cannot_change_or_is_no_memory_is_refused(seeded, uri):
    async with stdio_client(params(seeded)) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as s:
            await s.initialize()
            with pytest.raises(MCPError) as e:
                await s.subscribe_resource(uri)
            assert e.value.error.code == types.INVALID_PARAMS
            assert e.value.error.data["code"] == "invalid"
            assert "cannot subscribe" in e.value.error.message


ACL = """
[acl]
admin_devices = ["laptop"]

[[acl.rules]]
device = "phone"
read = ["prefs"]
"""


async def test_a_category_hidden_by_the_acl_cannot_be_subscribed_to(seeded, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(ACL)
    env = {"MEMDIR_CONFIG": str(config), "MEMDIR_DEVICE": "phone"}
    updates = Updates()
    async with stdio_client(params(seeded, **env)) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S, message_handler=updates.handler) as s:
            await s.initialize()
            with pytest.raises(MCPError) as e:
                await s.subscribe_resource("memdir://categories/other")
            assert e.value.error.data["code"] == "forbidden"
            await s.subscribe_resource("memdir://categories/prefs")
            cli(seeded, "write", "other", "--data", '{"k": 3}')
            await updates.none()
            cli(seeded, "write", "prefs", "--data", '{"editor": "ed"}')
            assert await updates.next() == "memdir://categories/prefs"


async def test_subscriptions_listen_on_a_2026_07_28_connection(seeded):
    async with Client(params(seeded), mode="2026-07-28", read_timeout_seconds=CALL_TIMEOUT_S) as client:
        uris = ["memdir://categories/prefs", "memdir://sessions/s1", "memdir://status"]
        async with client.listen(resource_subscriptions=uris) as sub:
            # The acknowledgement says what the server watches: not the status.
            assert sorted(sub.honored.resource_subscriptions or []) == uris[:2]
            cli(seeded, "write", "prefs", "--data", '{"editor": "kakoune"}')
            with anyio.fail_after(WAIT_S):
                event = await sub.__anext__()
            assert event == ResourceUpdated(uri="memdir://categories/prefs")
            cli(seeded, "ingest", "--session-id", "s1", "--text", "listened to")
            with anyio.fail_after(WAIT_S):
                event = await sub.__anext__()
            assert event == ResourceUpdated(uri="memdir://sessions/s1")
        # The stream ended with the context; the connection still answers.
        assert (await client.list_resources()).resources


async def test_a_subscription_over_mcp_http_hears_a_write_of_the_cli(http_server, tmp_path):
    """Over streamable HTTP the notification rides the session's standalone stream."""
    store = tmp_path / "store"
    cli(store, "init")
    srv = http_server("mcp-http", store=store)
    updates = Updates()
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(CALL_TIMEOUT_S, read=60), trust_env=False) as http:
        async with streamable_http_client(srv.mcp_url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S, message_handler=updates.handler) as s:
                await s.initialize()
                await s.subscribe_resource("memdir://categories/prefs")
                cli(store, "write", "prefs", "--data", '{"editor": "vim"}')
                assert await updates.next() == "memdir://categories/prefs"
