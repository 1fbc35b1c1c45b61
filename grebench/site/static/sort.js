// Sort a table.sortable by a column: each header becomes a button (Enter and Space work, as on any button; its th
// says the order in aria-sort). The pages read fine without this script: the tables come in rank order.
(function () {
  "use strict";
  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ""; }
    return cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
  }
  function compare(a, b, numeric) {
    if (numeric) {
      var x = parseFloat(a), y = parseFloat(b);
      var xn = isNaN(x), yn = isNaN(y);
      if (xn || yn) { return xn === yn ? 0 : (xn ? 1 : -1); }
      return x - y;
    }
    return a.localeCompare(b);
  }
  function sortBy(table, th, index) {
    var body = table.tBodies[0];
    if (!body) { return; }
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    var numeric = th.getAttribute("data-type") === "num";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r1, r2) {
      var c = compare(cellValue(r1, index), cellValue(r2, index), numeric);
      return ascending ? c : -c;
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    if (!table.tHead) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.title = "Sort by this column";
      while (th.firstChild) { button.appendChild(th.firstChild); }
      th.appendChild(button);
      button.addEventListener("click", function () { sortBy(table, th, index); });
    });
  });
}());
