from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

from approvals.api import api
from approvals.api.langgraph_server import api as langgraph_api
from config.health import healthz
from config.login_throttle import ThrottledAdminAuthenticationForm, ThrottledLoginView, throttled_admin_login

# The admin's own login page is throttled like /login/.
admin.site.login_form = ThrottledAdminAuthenticationForm

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("login/", login_not_required(ThrottledLoginView.as_view()), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/login/", throttled_admin_login, name="admin-login"),  # ahead of the admin's own
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("langgraph/", langgraph_api.urls),
    path("", include("approvals.urls")),
]

handler400 = "config.errors.bad_request"
handler404 = "config.errors.not_found"
handler500 = "config.errors.server_error"
