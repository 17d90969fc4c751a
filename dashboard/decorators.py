"""Access control for the dashboard's views."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from memories.models import User

View = Callable[..., HttpResponseBase]


class HtmxHttpRequest(HttpRequest):
    """A request HtmxMiddleware has seen."""

    htmx: HtmxDetails


class DashboardRequest(HtmxHttpRequest):
    """What a view behind login_required receives: the user is logged in."""

    user: User


def login_required(view: View) -> View:
    """Django's login_required, and for htmx requests a full-page redirect to the login.

    Following a plain redirect, htmx would swap the login page into a memory card; the
    person comes back to the page they were on, not to the fragment's URL.
    """

    @wraps(view)
    def wrapper(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        if request.htmx:
            back_to = request.htmx.current_url_abs_path or "/dashboard/"
            return HttpResponseClientRedirect(redirect_to_login(back_to)["Location"])
        return redirect_to_login(request.get_full_path())

    return wrapper
