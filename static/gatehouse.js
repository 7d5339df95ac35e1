// Show whether live updates are connected; the htmx ws extension reconnects by itself.
(function () {
  function setLive(online) {
    var badge = document.getElementById("live-status");
    if (!badge) return;
    badge.hidden = false;
    badge.textContent = online ? "live" : "live updates offline — reconnecting";
    badge.classList.toggle("offline", !online);
  }
  document.addEventListener("htmx:wsOpen", function () { setLive(true); });
  document.addEventListener("htmx:wsClose", function () { setLive(false); });
  document.addEventListener("htmx:wsError", function () { setLive(false); });
})();
