// The report's only script, allowed by hash in the page's Content-Security-Policy (nothing else
// may run): adds status filters to the "All verdicts" table, opens a collapsed section a link
// points into, and marks <body data-script="ran"> last, so a check of the DOM proves it ran
// without an error.
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
  document.body.setAttribute("data-script", "ran");
})();
