// Keyboard shortcuts for reviewers. Inbox: j/k move, Enter or o opens, c claims/releases.
// Decision page: a approve, e edit, r reject, c claim/release, j/k next/previous item.
// Keys typed into a field, or with a modifier, are left alone; Escape leaves the field.
(function () {
  "use strict";
  var selectedId = null;

  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#inbox-list .inbox-row")); }

  // The selection is an attribute, not a class: htmx's settle step restores the classes of swapped
  // elements, which would drop it after a live update.
  function select(row) {
    rows().forEach(function (r) { r.removeAttribute("aria-current"); });
    if (!row) { selectedId = null; return; }
    row.setAttribute("aria-current", "true");
    selectedId = row.id;
    row.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    var all = rows();
    if (!all.length) return;
    var at = all.findIndex(function (r) { return r.id === selectedId; });
    var next = at < 0 ? (step > 0 ? 0 : all.length - 1) : Math.min(Math.max(at + step, 0), all.length - 1);
    select(all[next]);
  }

  function current() { return selectedId ? document.getElementById(selectedId) : null; }

  function click(selector, scope) {
    var el = (scope || document).querySelector(selector);
    if (el) { el.click(); return true; }
    return false;
  }

  function openChoice(key) {
    var details = document.querySelector('details[data-key="' + key + '"]');
    if (!details) return;
    details.open = true;
    var field = details.querySelector("input:not([type=hidden]), textarea, select");
    if (field) { field.focus(); if (field.select) field.select(); }
  }

  function follow(nav) {
    var link = document.querySelector('a[data-nav="' + nav + '"]');
    if (link) window.location.href = link.href;
  }

  function onInbox(key) {
    if (key === "j") move(1);
    else if (key === "k") move(-1);
    else if ((key === "Enter" || key === "o") && current()) window.location.href = current().dataset.href;
    else if (key === "c" && current()) click('button[data-key="c"]', current());
    else return false;
    return true;
  }

  function onDecision(key) {
    if (key === "a") click('button[data-key="a"]');
    else if (key === "e") openChoice("e");
    else if (key === "r") openChoice("r");
    else if (key === "c") click('button[data-key="c"]');
    else if (key === "j") follow("next");
    else if (key === "k") follow("prev");
    else return false;
    return true;
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    var typing = target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
    if (typing) {
      if (event.key === "Escape") target.blur();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var handled = false;
    if (document.querySelector("[data-inbox]")) handled = onInbox(event.key);
    else if (document.querySelector("[data-decision]")) handled = onDecision(event.key);
    if (handled) event.preventDefault();
  });

  // A live update replaces the list: keep the selection on the same item when it is still there.
  document.addEventListener("htmx:oobAfterSwap", function () {
    if (selectedId) select(document.getElementById(selectedId));
  });

  // Filters apply as soon as they change (the form still has a button without JavaScript).
  document.addEventListener("change", function (event) {
    var form = event.target.closest && event.target.closest("form[data-autosubmit]");
    if (form) form.submit();
  });
})();
