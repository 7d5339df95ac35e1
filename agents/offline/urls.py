from django.urls import path

from agents.offline import views

app_name = "offline"

urlpatterns = [
    path("v1/chat/completions", views.chat_completions, name="chat-completions"),
]
