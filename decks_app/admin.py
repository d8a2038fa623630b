from django.contrib import admin

from .models import Feedback, Run, Session, TraceEvent, Workspace


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["id", "label", "root", "created_at"]


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["id", "deck_label", "model", "origin", "created_at"]
    list_filter = ["origin"]
    search_fields = ["id", "deck_path", "deck_label"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "session",
        "kind",
        "status",
        "model",
        "total_tokens",
        "cost",
        "created_at",
    ]
    list_filter = ["status", "kind"]
    search_fields = ["id", "session__id"]


@admin.register(TraceEvent)
class TraceEventAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "seq", "type", "ts"]
    list_filter = ["type"]
    search_fields = ["run__id"]


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = ["session", "message_ref_id", "rater", "score", "reason", "updated_at"]
