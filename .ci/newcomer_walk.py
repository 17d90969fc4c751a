"""Poll /healthz until the server answers, log in to /admin/ with the first account, then
call /mcp as docs/mcp-tools.md shows: refused without a token, answered with one from
issue_token."""

import http.cookiejar
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message


def main(base: str, username: str, password: str) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
                if response.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            sys.exit("the server did not answer /healthz within 180 s")
        time.sleep(1)
    print("healthz: 200")

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    login_url = f"{base}/admin/login/?next=/admin/"
    page = opener.open(login_url, timeout=10).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if not token:
        sys.exit("no CSRF token on the admin login page")
    form = urllib.parse.urlencode(
        {
            "csrfmiddlewaretoken": token.group(1),
            "username": username,
            "password": password,
            "next": "/admin/",
        }
    ).encode()
    request = urllib.request.Request(login_url, data=form, headers={"Referer": login_url})
    with opener.open(request, timeout=10) as response:
        body = response.read().decode()
        if response.url.rstrip("/") != f"{base}/admin" or "Site administration" not in body:
            sys.exit(f"admin login failed (ended at {response.url})")
    static = opener.open(f"{base}/static/admin/css/base.css", timeout=10)
    if static.status != 200:
        sys.exit("static files are not served")
    print(f"admin login as {username}: ok; static files: ok")
    call_mcp(base, username)


def post_mcp(base: str, body: dict[str, object], token: str | None) -> tuple[int, Message, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"{base}/mcp", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


def call_mcp(base: str, username: str) -> None:
    # docs/mcp-tools.md's curl example: one tools/call, no handshake.
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "taproot_recall", "arguments": {"query": "garden", "limit": 3}},
    }
    status, headers, _ = post_mcp(base, call, None)
    challenge = headers.get("WWW-Authenticate") or ""
    if status != 401 or "resource_metadata=" not in challenge:
        sys.exit(f"/mcp without a token answered {status} {challenge!r}, not a 401 challenge")
    issued = subprocess.run(
        [sys.executable, "manage.py", "issue_token", "--user", username],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if issued.returncode != 0 or not issued.stdout.strip():
        sys.exit(f"manage.py issue_token failed:\n{issued.stderr}")
    status, _, text = post_mcp(base, call, issued.stdout.strip())
    try:
        reply = json.loads(json.loads(text)["result"]["content"][0]["text"])
    except (ValueError, KeyError, IndexError, TypeError):
        reply = None
    if status != 200 or not reply or reply.get("status") != "ok":
        sys.exit(f"/mcp with an issued token answered {status}: {text[:500]}")
    print("/mcp: 401 without a token; taproot_recall with an issued token: ok")


if __name__ == "__main__":
    main(*sys.argv[1:4])
