"""Poll /healthz until the server answers, then log in to /admin/ with the first account."""

import http.cookiejar
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


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


if __name__ == "__main__":
    main(*sys.argv[1:4])
