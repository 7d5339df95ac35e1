from django.urls import path

from approvals import consumers

websocket_urlpatterns = [
    path("ws/inbox/", consumers.InboxConsumer.as_asgi()),
    path("ws/threads/<str:thread_id>/", consumers.ThreadConsumer.as_asgi()),
]
