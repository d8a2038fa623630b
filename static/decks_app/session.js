// The session page's only script: after the websocket opens (and after every reconnect),
// tell the server what this page already shows, so it sends only what is new.
(function () {
  document.body.addEventListener("htmx:wsOpen", function (evt) {
    var cursor = document.getElementById("cursor");
    if (!cursor) return;
    evt.detail.socketWrapper.send(JSON.stringify({
      after: parseInt(cursor.dataset.after || "0", 10),
      version: parseInt(cursor.dataset.version || "0", 10),
      status: cursor.dataset.status || null,
    }));
  });
  // Keep the newest text in view while it streams.
  document.body.addEventListener("htmx:wsAfterMessage", function () {
    var live = document.getElementById("live");
    if (live && live.lastElementChild) live.lastElementChild.scrollIntoView({block: "nearest"});
  });
})();
