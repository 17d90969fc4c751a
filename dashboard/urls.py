from django.urls import path

from dashboard.views import account, detail, imports, memories, preview, suggestions

app_name = "dashboard"

urlpatterns = [
    path("", memories.index, name="index"),
    path("preview/", preview.reflect_preview, name="preview"),
    path("memories/<uuid:memory_id>/", detail.memory_detail, name="memory"),
    path("memories/<uuid:memory_id>/card/", memories.memory_card, name="card"),
    path("memories/<uuid:memory_id>/curate/", memories.curate, name="curate"),
    path("memories/<uuid:memory_id>/gist/", memories.edit_gist, name="gist"),
    path("memories/<uuid:memory_id>/archive/", memories.archive, name="archive"),
    path("memories/<uuid:memory_id>/unarchive/", memories.unarchive, name="unarchive"),
    path("memories/<uuid:memory_id>/delete/", memories.delete, name="delete"),
    path("revisions/<int:revision_id>/restore/", detail.restore_revision, name="restore"),
    path(
        "suggestions/<uuid:memory_id>/<str:kind>/apply/",
        suggestions.apply,
        name="suggestion_apply",
    ),
    path(
        "suggestions/<uuid:memory_id>/<str:kind>/dismiss/",
        suggestions.dismiss,
        name="suggestion_dismiss",
    ),
    path("closings/", account.closings, name="closings"),
    path("export/", account.export, name="export"),
    path("import/", imports.import_page, name="import"),
    path("clients/", account.clients, name="clients"),
    path("clients/<int:application_id>/revoke/", account.revoke, name="revoke"),
]
