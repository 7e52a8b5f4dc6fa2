"use strict";
// The cluster's usage: the server reports per day and user; other groupings are sums of those
// rows, made here so the administrator can switch without another request.
Libra.views = Libra.views || {};
(function () {
  var rows = [];
  var last = null;
  var select = document.getElementById("usage-group");

  function render() {
    var by = select.value;
    var groups = {};
    var order = [];
    rows.forEach(function (r) {
      var k = by === "user" ? r.user : by === "period" ? r.period : r.period + "\u0000" + r.user;
      if (!groups[k]) {
        groups[k] = { period: by === "user" ? "all" : r.period, user: by === "period" ? "all" : r.user, jobs: 0, completed: 0, cpu_hours: 0, revenue: 0 };
        order.push(k);
      }
      var g = groups[k];
      g.jobs += r.jobs; g.completed += r.completed; g.cpu_hours += r.cpu_hours; g.revenue += r.revenue_cents;
    });
    var total = { jobs: 0, completed: 0, cpu_hours: 0, revenue: 0 };
    var body = order.map(function (k) {
      var g = groups[k];
      total.jobs += g.jobs; total.completed += g.completed; total.cpu_hours += g.cpu_hours; total.revenue += g.revenue;
      return [g.period + (by === "period" ? "" : " / " + g.user), String(g.jobs), String(g.completed), Libra.num(g.cpu_hours, 4), Libra.money(g.revenue)];
    });
    if (body.length) body.push(["Total", String(total.jobs), String(total.completed), Libra.num(total.cpu_hours, 4), Libra.money(total.revenue)]);
    Libra.replace(document.getElementById("usage-table"), Libra.table("Usage by " + select.options[select.selectedIndex].text.toLowerCase() + " (days in UTC)",
      [by === "period" ? "Day" : by === "user" ? "User" : "Day / user", "Jobs", "Completed", "CPU hours", "Revenue (credits)"], body, "No usage yet."));
  }

  select.addEventListener("change", render);

  Libra.views["admin-usage"] = {
    admin: true,
    show: function () { last = null; },
    refresh: function () {
      return Libra.get("/api/admin/usage").then(function (r) {
        var key = JSON.stringify(r);
        if (key === last) return;
        last = key;
        rows = r;
        render();
      });
    },
  };
})();
