"use strict";
// My account: balance, the accounts the user may charge, the holds on accepted jobs, the ledger and a chart of what was spent.
Libra.views = Libra.views || {};
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var last = null;

  function render(b, jobs, ledger, accounts) {
    Libra.replace($("balance"), Libra.h("dl", { class: "facts", id: "balance-facts" },
      Libra.h("dt", null, "Available"), Libra.h("dd", { id: "balance-available" }, Libra.money(b.available_cents) + " credits"),
      Libra.h("dt", null, "On hold"), Libra.h("dd", { id: "balance-held" }, Libra.money(b.held_cents) + " credits"),
      Libra.h("dt", null, "Charged in total"), Libra.h("dd", { id: "balance-charged" }, Libra.money(b.charged_cents) + " credits"),
      Libra.h("dt", null, "Deposited in total"), Libra.h("dd", null, Libra.money(b.deposited_cents) + " credits")));

    // Every account the user may charge (their personal one first) and what is left to them.
    var accts = accounts.map(function (m) {
      var a = m.account;
      return [a.name + (a.personal ? " (personal)" : ""), m["default"] ? "yes" : "", Libra.money(a.available_cents),
        Libra.money(a.held_cents), Libra.money(a.charged_cents), m.limit_cents === null ? "-" : Libra.money(m.limit_cents),
        Libra.money(m.used_cents), Libra.money(m.available_to_me_cents)];
    });
    Libra.replace($("accounts"), Libra.table("Your accounts: credit, your limit and use in each (credits)",
      ["Account", "Default", "Available", "On hold", "Charged", "Your limit", "Your use", "Available to you"], accts, "No accounts."));

    // A HELD job has given up its hold until it is released.
    var holds = jobs.filter(function (j) { return Libra.isActive(j.state) && j.state !== "HELD"; }).map(function (j) {
      return [Libra.h("a", { href: "#job/" + j.id }, String(j.id)), j.state, Libra.money(j.cost_cents), Libra.time(j.deadline_at)];
    });
    Libra.replace($("holds"), Libra.table("Credit held for accepted jobs until they settle",
      ["Job", "State", "Held", "Deadline"], holds, "Nothing on hold."));

    // Spending = charges captured, as a running total over time.
    var total = 0, points = [];
    ledger.slice().sort(function (a, b) { return a.time - b.time; }).forEach(function (e) {
      if (e.kind !== "charge") return;
      total += Math.abs(e.amount_cents);
      points.push([e.time, total]);
    });
    Libra.replace($("spending-chart"), Libra.stepChart({
      id: "spending-svg",
      title: "Credits spent over time",
      desc: points.length ? points.length + " charges, " + Libra.money(total) + " credits in total, the last at " +
        new Date(points[points.length - 1][0] * 1000).toLocaleString() + "." : "No charges yet.",
      empty: "No charges yet",
      xLabel: "time",
      format: function (v) { return Libra.money(Math.round(v)); },
      points: points,
    }));

    var rows = ledger.slice().sort(function (a, b) { return b.id - a.id; }).slice(0, 100).map(function (e) {
      return [String(e.id), Libra.time(e.time), e.kind, e.job === null || e.job === undefined ? "-" : String(e.job), Libra.money(e.amount_cents)];
    });
    Libra.replace($("ledger"), Libra.table("Ledger entries, newest first (at most 100)",
      ["Entry", "Time", "Kind", "Job", "Amount"], rows, "No ledger entries."));
  }

  Libra.views.account = {
    show: function () { last = null; },
    refresh: function () {
      return Promise.all([Libra.get("/api/balance"), Libra.get("/api/jobs?limit=1000"), Libra.get("/api/ledger"),
        Libra.get("/api/accounts")])
        .then(function (r) {
          var key = JSON.stringify([r[0], r[2], r[3], r[1].map(function (j) { return [j.id, j.state]; })]);
          if (key === last) return;
          last = key;
          render(r[0], r[1], r[2], r[3]);
        });
    },
  };
})();
