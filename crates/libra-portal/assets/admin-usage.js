"use strict";
// The cluster's usage: the server reports per day, user and account; other groupings are sums
// of those rows, made here so the administrator can switch without another request. Below, every
// shared account's credit and members.
Libra.views = Libra.views || {};
(function () {
  var rows = [];
  var last = null;
  var select = document.getElementById("usage-group");

  var LABELS = { "period-user": "Day / user", user: "User", period: "Day", account: "Account", "account-user": "Account / user" };

  // The row's group key and label for the grouping chosen.
  function group(by, r) {
    var acct = r.account || r.user;
    switch (by) {
      case "user": return r.user;
      case "period": return r.period;
      case "account": return acct;
      case "account-user": return acct + " / " + r.user;
      default: return r.period + " / " + r.user;
    }
  }

  function render() {
    var by = select.value;
    var groups = {};
    var order = [];
    rows.forEach(function (r) {
      var k = group(by, r);
      if (!groups[k]) {
        groups[k] = { label: k, jobs: 0, completed: 0, cpu_hours: 0, revenue: 0 };
        order.push(k);
      }
      var g = groups[k];
      g.jobs += r.jobs; g.completed += r.completed; g.cpu_hours += r.cpu_hours; g.revenue += r.revenue_cents;
    });
    order.sort();
    var total = { jobs: 0, completed: 0, cpu_hours: 0, revenue: 0 };
    var body = order.map(function (k) {
      var g = groups[k];
      total.jobs += g.jobs; total.completed += g.completed; total.cpu_hours += g.cpu_hours; total.revenue += g.revenue;
      return [g.label, String(g.jobs), String(g.completed), Libra.num(g.cpu_hours, 4), Libra.money(g.revenue)];
    });
    if (body.length) body.push(["Total", String(total.jobs), String(total.completed), Libra.num(total.cpu_hours, 4), Libra.money(total.revenue)]);
    Libra.replace(document.getElementById("usage-table"), Libra.table("Usage by " + select.options[select.selectedIndex].text.toLowerCase() + " (days in UTC)",
      [LABELS[by], "Jobs", "Completed", "CPU hours", "Charged (credits)"], body, "No usage yet."));
  }

  function renderAccounts(all) {
    var body = all.map(function (a) {
      var members = a.members.map(function (m) {
        return m.user + (m.limit_cents === null ? "" : " (limit " + Libra.money(m.limit_cents) + ", used " + Libra.money(m.used_cents) + ")");
      }).join(", ");
      var allocs = a.allocations.filter(function (x) { return x.active; }).map(function (x) {
        return Libra.money(x.remaining_cents) + " until " + Libra.time(x.end);
      }).join(", ");
      return [a.name, Libra.money(a.available_cents), Libra.money(a.held_cents), Libra.money(a.charged_cents),
        Libra.money(a.credited_cents), allocs || "-", members || "-"];
    });
    Libra.replace(document.getElementById("usage-accounts"), Libra.table("Shared accounts (credits)",
      ["Account", "Available", "On hold", "Charged", "Credited", "Active allocations", "Members"], body,
      "No shared accounts: create one with libra admin account create NAME."));
  }

  select.addEventListener("change", render);

  Libra.views["admin-usage"] = {
    admin: true,
    show: function () { last = null; },
    refresh: function () {
      return Promise.all([Libra.get("/api/admin/usage"), Libra.get("/api/admin/accounts")]).then(function (r) {
        var key = JSON.stringify(r);
        if (key === last) return;
        last = key;
        rows = r[0];
        render();
        renderAccounts(r[1]);
      });
    },
  };
})();
