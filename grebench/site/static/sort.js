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
  // Boxes that scroll: a board's .table-scroll says so (a fade and a line, style.css) and tells when it is scrolled
  // to its end; any other box that scrolls (a wide table, a long code block) can be reached by keyboard.
  document.documentElement.classList.add("js");
  function overflows(el) { return el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1; }
  function mark() {
    document.querySelectorAll(".table-scroll").forEach(function (box) {
      var wrap = box.querySelector(".table-wrap");
      if (!wrap) { return; }
      box.classList.toggle("overflowing", wrap.scrollWidth > wrap.clientWidth + 1);
      box.classList.toggle("at-end", wrap.scrollLeft + wrap.clientWidth >= wrap.scrollWidth - 1);
    });
    document.querySelectorAll("table, pre").forEach(function (el) {
      if (!el.hasAttribute("tabindex") && !el.closest(".table-wrap") && overflows(el)) {
        el.setAttribute("tabindex", "0");
        if (el.tagName === "PRE" && !el.hasAttribute("aria-label")) { el.setAttribute("aria-label", "Code (scrolls)"); }
      }
    });
  }
  document.querySelectorAll(".table-wrap").forEach(function (wrap) { wrap.addEventListener("scroll", mark); });
  window.addEventListener("resize", mark);
  document.querySelectorAll("details").forEach(function (d) { d.addEventListener("toggle", mark); });
  mark();
}());
