// "Re-run offline" is offered only where a recording can answer. A run that starts or ends
// while the page is open changes that, so when the live status changes the button's slot
// asks the server again (GET /test/<id>/rerun answers htmx with the slot alone).
(function () {
  var statusEl = document.getElementById("status");
  var last = statusEl ? statusEl.textContent.trim() : null;
  document.body.addEventListener("htmx:wsAfterMessage", function () {
    var slot = document.getElementById("rerun-slot");
    var el = document.getElementById("status");
    var status = el ? el.textContent.trim() : null;
    if (!slot || !status || status === last) return;
    last = status;
    htmx.ajax("GET", slot.dataset.src, {target: slot, swap: "outerHTML"});
  });
})();
