// Toasts (decks_app/web/templates/web/toasts.html): each leaves after a few seconds, sooner
// with its × button, and stays while the pointer or the keyboard focus is on it.
(function () {
  var STAY_MS = 5000;
  function leave(toast) {
    if (!toast.isConnected) return;
    toast.classList.add("leaving");
    setTimeout(function () { toast.remove(); }, 300);
  }
  function arm(toast) {
    if (toast.dataset.armed) return;
    toast.dataset.armed = "1";
    var timer = setTimeout(function () { leave(toast); }, STAY_MS);
    function hold() { clearTimeout(timer); }
    function release() { timer = setTimeout(function () { leave(toast); }, STAY_MS); }
    toast.addEventListener("mouseenter", hold);
    toast.addEventListener("focusin", hold);
    toast.addEventListener("mouseleave", release);
    toast.addEventListener("focusout", release);
    var close = toast.querySelector(".toast-close");
    if (close) close.addEventListener("click", function () { leave(toast); });
  }
  function armAll() {
    document.querySelectorAll("#toasts [data-toast]").forEach(arm);
  }
  document.addEventListener("DOMContentLoaded", armAll);
  document.addEventListener("htmx:oobAfterSwap", armAll);
  document.addEventListener("htmx:afterSettle", armAll);
  armAll();
})();
