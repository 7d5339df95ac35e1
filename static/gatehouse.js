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

// Forms pushed over the WebSocket were rendered without a request, so they carry no CSRF
// field: give any POST form that lacks one the page's token before it submits.
(function () {
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || form.method.toLowerCase() !== "post") return;
    var field = form.querySelector("input[name=csrfmiddlewaretoken]");
    if (field && field.value) return;
    var token = "";
    try { token = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; } catch (e) { return; }
    if (!field) {
      field = document.createElement("input");
      field.type = "hidden";
      field.name = "csrfmiddlewaretoken";
      form.appendChild(field);
    }
    field.value = token;
  }, true);
})();

// A form with data-confirm asks before it submits (no inline handlers: the CSP forbids them).
(function () {
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
    if (!window.confirm(form.dataset.confirm)) { event.preventDefault(); event.stopImmediatePropagation(); }
  }, true);
})();

// A form that comes back with errors: focus its first invalid field, so keyboard and screen-reader
// users land on what to fix (the button they pressed was swapped away with the form).
(function () {
  document.addEventListener("htmx:afterSettle", function (event) {
    var field = event.target.querySelector && event.target.querySelector('[aria-invalid="true"]');
    if (!field || !event.target.isConnected) return;
    field.focus({ preventScroll: true });
    (field.closest("label") || field).scrollIntoView({ block: "nearest" });  // with its error text
  });
})();
