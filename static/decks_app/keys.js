// Keyboard shortcuts shared by every page: ? lists them, Esc stops the running turn on a
// session page, j/k move between events on the trace page. Never while typing in a field.
(function () {
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  document.addEventListener("keydown", function (evt) {
    if (evt.key === "Escape") {
      var stop = document.getElementById("stop");
      if (stop && !stop.disabled) {
        evt.preventDefault();
        // Post directly rather than clicking: the button may be swapped out by a live update
        // at this very moment, and a click on a detached button would be lost.
        var url = stop.getAttribute("hx-post");
        if (window.htmx && url) window.htmx.ajax("POST", url, { source: document.body, swap: "none" });
        else stop.click();
      }
      return;
    }
    if (typing(evt.target) || evt.ctrlKey || evt.metaKey || evt.altKey) return;
    if (evt.key === "?") {
      var dialog = document.getElementById("shortcuts");
      if (dialog && !dialog.open) { evt.preventDefault(); dialog.showModal(); }
      return;
    }
    if (evt.key === "j" || evt.key === "k") {
      var rows = Array.prototype.slice.call(document.querySelectorAll(".events > li > details > summary"));
      if (!rows.length) return;
      evt.preventDefault();
      var at = rows.indexOf(document.activeElement);
      var next = evt.key === "j" ? Math.min(rows.length - 1, at + 1) : Math.max(0, at - 1);
      rows[next].focus();
      rows[next].scrollIntoView({ block: "nearest" });
    }
  });
})();
