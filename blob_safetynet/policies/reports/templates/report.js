"use strict";
(function () {
  const severity = document.getElementById("filter-severity");
  const framework = document.getElementById("filter-framework");
  const stateFilter = document.getElementById("filter-state");
  const shown = document.getElementById("shown");

  function byRule(element) {
    const wanted = severity.value === "" ? -1 : Number(severity.value);
    const frameworks = element.dataset.frameworks || "|";
    const byFramework = framework.value === "" || frameworks.includes("|" + framework.value + "|");
    return Number(element.dataset.rank || "0") >= wanted && byFramework;
  }

  function byState(element) {
    return stateFilter.value === "" || element.dataset.state === stateFilter.value;
  }

  function count() {
    const counters = document.querySelectorAll("[data-count-state]");
    const totals = {};
    counters.forEach(function (counter) {
      totals[counter.dataset.countState] = 0;
    });
    document.querySelectorAll("td.cell[data-state]").forEach(function (cell) {
      totals[cell.dataset.state] += 1;
    });
    counters.forEach(function (counter) {
      counter.textContent = String(totals[counter.dataset.countState]);
    });
    const rows = document.querySelectorAll(".matrix tbody tr").length;
    document.getElementById("count-accounts").textContent = String(rows);
  }

  function apply() {
    let verdicts = 0;
    document.querySelectorAll("th.rule, td.cell").forEach(function (element) {
      element.classList.toggle("hidden", !byRule(element));
    });
    document.querySelectorAll(".matrix tbody tr").forEach(function (row) {
      const cells = Array.from(row.querySelectorAll("td.cell[data-state]")).filter(function (cell) {
        return byRule(cell) && byState(cell);
      });
      verdicts += cells.length;
      row.classList.toggle("hidden", cells.length === 0);
    });
    document.querySelectorAll(".finding").forEach(function (finding) {
      finding.classList.toggle("hidden", !(byRule(finding) && byState(finding)));
    });
    shown.textContent = verdicts + " verdict(s) shown";
  }

  [severity, framework, stateFilter].forEach(function (control) {
    control.addEventListener("change", apply);
  });
  count();
  apply();
})();
