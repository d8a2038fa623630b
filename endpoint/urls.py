"""`/v1/*`: the Open Responses endpoint (and the legacy chat completions)."""

from django.urls import path

from endpoint import views as v1

app_name = "endpoint"

urlpatterns = [
    path("v1/responses", v1.responses, name="v1_responses"),
    path("v1/responses/<str:response_id>", v1.response_detail, name="v1_response"),
    path(
        "v1/responses/<str:response_id>/input_items",
        v1.response_input_items,
        name="v1_response_input_items",
    ),
    path("v1/models", v1.models, name="v1_models"),
    path("v1/chat/completions", v1.chat_completions, name="v1_chat_completions"),
]
