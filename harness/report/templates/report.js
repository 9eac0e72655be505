// The report's only script, allowed by hash in the page's Content-Security-Policy (nothing else
// may run): adds status filters to the "All verdicts" table, opens a collapsed section a link
// points into, and marks <body data-script="ran"> last, so a check of the DOM proves it ran
// without an error. It also records two layout facts on <body> (below).
(function () {
  "use strict";
  var table = document.querySelector("table.all");
  if (table) {
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    var counts = {};
    rows.forEach(function (row) { counts[row.dataset.status] = (counts[row.dataset.status] || 0) + 1; });
    var bar = document.createElement("div");
    bar.className = "filter";
    bar.appendChild(document.createTextNode("Show:"));
    Object.keys(counts).forEach(function (status) {
      var label = document.createElement("label");
      var box = document.createElement("input");
      box.type = "checkbox";
      box.checked = true;
      box.addEventListener("change", function () {
        rows.forEach(function (row) { if (row.dataset.status === status) { row.hidden = !box.checked; } });
      });
      label.appendChild(box);
      label.appendChild(document.createTextNode(" " + status + " (" + counts[status] + ")"));
      bar.appendChild(label);
    });
    table.parentNode.insertBefore(bar, table);
  }
  function openTarget() {
    var node = location.hash ? document.getElementById(decodeURIComponent(location.hash.slice(1))) : null;
    for (; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") { node.open = true; }
    }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  // Layout facts a headless check reads back from the DOM (tests/test_report_layout.py): how many px
  // the summary matrix runs past the window's right edge, and how many engine or scenario names
  // wrapped inside a word (a part between two <wbr>s laid out on more than one line).
  var matrix = document.querySelector("table.matrix");
  if (matrix) {
    var split = 0;
    Array.prototype.forEach.call(matrix.querySelectorAll("th.engine, th.scenario"), function (th) {
      Array.prototype.forEach.call(th.childNodes, function (node) {
        if (node.nodeType === 3 && node.textContent.length) {
          var range = document.createRange();
          range.selectNodeContents(node);
          if (range.getClientRects().length > 1) { split += 1; }
        }
      });
    });
    var past = Math.ceil(matrix.getBoundingClientRect().right - document.documentElement.clientWidth);
    document.body.setAttribute("data-matrix-overflow-px", String(Math.max(0, past)));
    document.body.setAttribute("data-names-split", String(split));
  }
  document.body.setAttribute("data-script", "ran");
})();
