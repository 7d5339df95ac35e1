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

// The decision panel agrees with its status line. A claim refused with a 409 (someone claimed it
// first; it expired) answers with the status line alone; a push brings the status line alone when
// the socket believes the page's panel current, but the page may have fetched a newer one since (at
// the deadline, after such a 409). Either way: fetch the panel around the line.
(function () {
  function refresh(line) {
    var panel = line && line.isConnected && line.closest("[data-panel-url]");
    if (panel && window.htmx) window.htmx.ajax("GET", panel.dataset.panelUrl, { target: "#" + panel.id, swap: "outerHTML" });
  }
  document.addEventListener("htmx:afterSwap", function (event) {
    var line = event.target;  // the status line swapped in
    var xhr = event.detail.xhr;
    if (xhr && xhr.status === 409 && /^request-status-/.test(line.id || "")) refresh(line);
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    document.querySelectorAll(".request-status[data-panel-mark]").forEach(function (line) {
      var panel = line.closest("[data-panel-mark]:not(.request-status)");
      if (panel && panel.dataset.panelMark !== line.dataset.panelMark) refresh(line);
    });
  });
})();

// A swap or a push that replaces the focused control (Approve, Claim) drops the focus to <body>,
// and keyboard and screen-reader users would start again from the top: put it on the new content's
// counterpart (the same shortcut's button), else its outcome (a status), else the content itself.
// Only focus that is already lost moves: a push never takes the focus from where it is.
(function () {
  var held = null;  // the focused element and its nearest ancestor with an id (what a swap replaces)
  document.addEventListener("focusin", function (event) {
    var el = event.target;
    var root = el.parentElement && el.parentElement.closest("[id]");
    held = root ? { el: el, id: root.id, key: (el.dataset && el.dataset.key) || "" } : null;
  });
  function shown(root, selector) {
    return Array.prototype.find.call(root.querySelectorAll(selector), function (el) { return el.getClientRects().length > 0; });
  }
  function recover() {
    var from = held;
    if (!from || from.el.isConnected || (document.activeElement && document.activeElement !== document.body)) return;
    held = null;
    var root = document.getElementById(from.id);
    if (!root) return;
    var to = shown(root, '[aria-invalid="true"]') || (from.key && shown(root, '[data-key="' + from.key + '"]')) ||
      shown(root, "[role=status], [role=alert]") || root;
    if (!to.matches("a[href], button, input, select, textarea, summary")) to.setAttribute("tabindex", "-1");
    to.focus({ preventScroll: true });
  }
  ["htmx:afterSwap", "htmx:oobAfterSwap", "htmx:wsAfterMessage"].forEach(function (name) {
    document.addEventListener(name, recover);
  });
})();
