// The trace page: the tree as a keyboard-navigable ARIA tree (WAI-ARIA Authoring Practices,
// "Tree View": arrows move, Right/Left open and close, Home/End, Enter shows the node's
// detail through its htmx link), folded runs that load when opened, and the JSON viewer's
// Copy / Expand all / Collapse all buttons. Markup comes from the server's templates.
(function () {
  function items(tree) {
    // The visible treeitems, in order (a closed node's group is display: none).
    return Array.prototype.filter.call(tree.querySelectorAll("[role=treeitem]"), function (el) {
      return el.getClientRects().length > 0;
    });
  }

  function focusItem(tree, item) {
    if (!item) return;
    Array.prototype.forEach.call(tree.querySelectorAll("[role=treeitem][tabindex='0']"), function (el) {
      if (el !== item) el.setAttribute("tabindex", "-1");
    });
    item.setAttribute("tabindex", "0");
    item.focus();
    item.scrollIntoView({ block: "nearest" });
  }

  function group(item) {
    var next = item.nextElementSibling;
    return next && next.getAttribute("role") === "group" ? next : null;
  }

  function parentItem(item) {
    var g = item.parentElement && item.parentElement.closest("[role=group]");
    return g ? g.previousElementSibling : null;
  }

  function expand(item) {
    if (item.getAttribute("aria-expanded") !== "false") return;
    item.setAttribute("aria-expanded", "true");
    var url = item.getAttribute("data-lazy");
    if (!url || !window.htmx) return;
    item.removeAttribute("data-lazy");
    item.setAttribute("aria-busy", "true");
    window.htmx.ajax("GET", url, { target: item.parentElement, swap: "beforeend" }).then(function () {
      var loaded = group(item);
      item.removeAttribute("aria-busy");
      if (loaded) item.setAttribute("aria-owns", loaded.id);
    });
  }

  function collapse(item) {
    if (item.getAttribute("aria-expanded") === "true") item.setAttribute("aria-expanded", "false");
  }

  function select(tree, item) {
    Array.prototype.forEach.call(tree.querySelectorAll("[role=treeitem][aria-selected=true]"), function (el) {
      el.setAttribute("aria-selected", "false");
    });
    item.setAttribute("aria-selected", "true");
  }

  function onKey(evt) {
    var tree = evt.currentTarget;
    var item = evt.target.closest("[role=treeitem]");
    if (!item || evt.altKey || evt.ctrlKey || evt.metaKey) return;
    var all = items(tree);
    var at = all.indexOf(item);
    switch (evt.key) {
      case "ArrowDown": focusItem(tree, all[Math.min(all.length - 1, at + 1)]); break;
      case "ArrowUp": focusItem(tree, all[Math.max(0, at - 1)]); break;
      case "Home": focusItem(tree, all[0]); break;
      case "End": focusItem(tree, all[all.length - 1]); break;
      case "ArrowRight":
        if (item.getAttribute("aria-expanded") === "false") expand(item);
        else if (item.getAttribute("aria-expanded") === "true" && group(item)) {
          focusItem(tree, group(item).querySelector("[role=treeitem]"));
        }
        break;
      case "ArrowLeft":
        if (item.getAttribute("aria-expanded") === "true") collapse(item);
        else focusItem(tree, parentItem(item));
        break;
      case " ": item.click(); break;
      default: return;
    }
    evt.preventDefault();
  }

  function onClick(evt) {
    var twisty = evt.target.closest(".twisty");
    if (!twisty) return;
    // The triangle opens or closes a node without selecting it.
    var item = twisty.closest("[role=treeitem]");
    if (!item || !item.hasAttribute("aria-expanded")) return;
    evt.preventDefault();
    evt.stopPropagation();
    if (item.getAttribute("aria-expanded") === "false") expand(item);
    else collapse(item);
  }

  function setUp(root) {
    Array.prototype.forEach.call(root.querySelectorAll("[data-trace-tree]"), function (tree) {
      if (tree.dataset.ready) return;
      tree.dataset.ready = "1";
      tree.addEventListener("keydown", onKey);
      tree.addEventListener("click", onClick, true);
      if (!tree.querySelector("[role=treeitem][tabindex='0']")) {
        var first = tree.querySelector("[role=treeitem]");
        if (first) first.setAttribute("tabindex", "0");
      }
    });
  }

  // Selecting a node (a tree row, or an ancestor in the detail's breadcrumb) marks it.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var source = evt.detail && evt.detail.elt;
    if (!source || !source.closest) return;
    var tree = document.querySelector("[data-trace-tree]");
    if (!tree) return;
    var id = source.getAttribute("data-select");
    var item = source.getAttribute("role") === "treeitem" ? source : id && document.getElementById(id);
    if (item && tree.contains(item)) {
      select(tree, item);
      if (source !== item) focusItem(tree, item);
    }
  });

  // The JSON link follows the selection (the twin of the URL a node's link pushed).
  document.addEventListener("htmx:pushedIntoHistory", function (evt) {
    var link = document.querySelector("a[data-twin]");
    var path = evt.detail && evt.detail.path;
    if (!link || !path) return;
    var at = path.indexOf("?");
    link.setAttribute("href", at < 0 ? path + ".json" : path.slice(0, at) + ".json" + path.slice(at));
  });

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "sr-only";
    document.body.appendChild(area);
    area.select();
    var ok = document.execCommand("copy");
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-json-copy], [data-json-expand], [data-json-collapse]");
    if (!button) return;
    var view = button.closest("[data-json-view]");
    if (!view) return;
    var status = view.querySelector(".json-status");
    if (button.hasAttribute("data-json-copy")) {
      var text = view.querySelector(".json-text").textContent;
      copyText(text).then(
        function () { if (status) status.textContent = "Copied"; },
        function () { if (status) status.textContent = "Copy failed: select the Raw text"; }
      );
      return;
    }
    var open = button.hasAttribute("data-json-expand");
    Array.prototype.forEach.call(view.querySelectorAll(".json-tree details"), function (d) { d.open = open; });
  });

  setUp(document);
  document.addEventListener("htmx:load", function (evt) { setUp(evt.target || document); });
})();
