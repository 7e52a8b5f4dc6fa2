"use strict";
// The cluster's queue (like squeue): every unfinished job, soonest deadline first. The server
// anonymises other users' jobs for a user who is not an administrator.
Libra.views = Libra.views || {};
(function () {
  var last = null;
  var HEAD = ["Job", "User", "Name", "State", "Node", "Share (CPU)", "To deadline", "Held"];

  Libra.views.queue = {
    show: function () { last = null; },
    refresh: function () {
      return Libra.get("/api/queue").then(function (jobs) {
        var key = JSON.stringify(jobs) + Math.floor(Date.now() / 2000);
        if (key === last) return;
        last = key;
        var rows = jobs.map(function (j) {
          return [
            j.mine ? Libra.h("a", { href: "#job/" + j.id }, String(j.id)) : String(j.id),
            Libra.h("span", { class: "long named" }, j.user),
            Libra.h("span", { class: "long named" }, j.name || (j.command.length ? j.command.join(" ") : "-")),
            Libra.stateBadge(j.state),
            Libra.h("span", { class: "long" }, j.nodes.join(", ") || "(queued)"),
            Libra.num(j.share, 3),
            Libra.duration(j.deadline_at - Date.now() / 1000),
            j.cost_cents === undefined ? "-" : Libra.money(j.cost_cents),
          ];
        });
        Libra.replace(document.getElementById("queue-table"),
          Libra.table("Unfinished jobs, soonest deadline first", HEAD, rows, "No unfinished jobs."));
      });
    },
  };
})();
