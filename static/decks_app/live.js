// Live pages follow their session's websocket (docs/simulator.md, "Live updates"). When the
// socket opens, and after every reconnect, the page says what it shows: the session page its
// cursor (last event id, conversation version, status), so the server sends only what is
// new; any other live page the part it wants kept up to date (data-live-view and
// data-live-key on the element that holds ws-connect) and, on its first hello, the digest of
// that part as the page was rendered (data-live-digest), so an unchanged part is not swapped
// under the user's cursor. Everything after that is htmx out-of-band swaps rendered by the
// server.
(function () {
  document.body.addEventListener("htmx:wsOpen", function (evt) {
    var elt = evt.target;
    var hello;
    if (elt.dataset && elt.dataset.liveView) {
      hello = { view: elt.dataset.liveView, key: elt.dataset.liveKey || "" };
      if (elt.dataset.liveDeck !== undefined) hello.deck = elt.dataset.liveDeck;
      if (elt.dataset.liveDigest) hello.digest = elt.dataset.liveDigest;
    } else {
      var cursor = document.getElementById("cursor");
      if (!cursor) return;
      hello = {
        after: parseInt(cursor.dataset.after || "0", 10),
        version: parseInt(cursor.dataset.version || "0", 10),
        status: cursor.dataset.status || null,
      };
    }
    evt.detail.socketWrapper.send(JSON.stringify(hello));
  });
  // Once the socket has swapped the part, the page no longer shows what the digest named:
  // a reconnect asks for the part again.
  document.body.addEventListener("htmx:wsAfterMessage", function (evt) {
    var elt = evt.target;
    if (elt.dataset && elt.dataset.liveDigest) delete elt.dataset.liveDigest;
  });
})();
