"use strict";
// My jobs, refreshed by polling. The table is rebuilt only when the data changed, so a
// keyboard user's focus on a button is not thrown away every two seconds.
Libra.views = Libra.views || {};
(function () {
  // CPU used is summed over the job's nodes while the estimate is per node, so the whole job's
  // work is estimate x procs: a two-node job at its end used twice its estimate, and comparing
  // the sum with one node's estimate read "180 of 90 CPU-s".
  Libra.progress = function (j) {
    var procs = j.procs > 1 ? j.procs : 1;
    var work = j.estimate * procs;
    var frac = work > 0 ? Math.min(j.cpu_seconds / work, 1) : 0;
    var label = Libra.num(j.cpu_seconds, 1) + " of " + Libra.num(work, 1) + " CPU-s";
    var nodes = procs > 1 ? "on " + procs + " nodes" : null;
    // The bar and the label may sit on two lines, so a narrow table column need not be wider
    // than the label; each stays whole.
    return Libra.h("span", { class: "progress" },
      Libra.h("progress", {
        max: "1", value: String(frac),
        "aria-label": "Job " + j.id + " progress: " + label + (nodes ? " " + nodes : ""),
      }),
      " ", Libra.h("span", { class: "progress-label" }, label),
      nodes ? [" ", Libra.h("span", { class: "progress-label" }, nodes)] : null);
  };

  Libra.toDeadline = function (j) {
    if (Libra.isActive(j.state)) return Libra.duration(j.deadline_at - Date.now() / 1000);
    // Only a job that ran to its end met or missed its deadline; a cancelled or failed one did neither.
    if (j.state === "COMPLETED") return "met";
    if (j.state === "DEADLINE") return "missed";
    return "-";
  };

  Libra.costCell = function (j) {
    if (Libra.isActive(j.state)) return "held " + Libra.money(j.cost_cents);
    if (j.state === "REJECTED") return "-";
    return "charged " + Libra.money(j.charged_cents);
  };

  // One row of a job table; `actions` adds the buttons the viewer may use.
  Libra.jobCells = function (j, actions, withUser) {
    var cells = [Libra.h("a", { href: "#job/" + j.id }, String(j.id))];
    // Names, commands and node lists may be one long word: they break anywhere rather than
    // widen the table past the screen.
    if (withUser) cells.push(Libra.h("span", { class: "long named" }, j.user));
    cells.push(Libra.h("span", { class: "long named" }, j.name || j.command.join(" ")), Libra.stateBadge(j.state),
      Libra.h("span", { class: "long" }, j.nodes.join(", ") || "-"),
      Libra.num(j.share, 3), Libra.progress(j), Libra.toDeadline(j), Libra.costCell(j),
      Libra.h("span", { class: "actions" }, actions));
    return cells;
  };

  Libra.cancelButton = function (j, path) {
    return Libra.h("button", {
      type: "button", "aria-label": "Cancel job " + j.id,
      onclick: function () {
        Libra.post(path).then(function (r) {
          Libra.announce("Job " + r.id + " is " + r.state + ".");
        }).catch(function (e) { Libra.announce(String(e)); });
      },
    }, "Cancel");
  };

  // Hold a job no node has started (its promise and hold are given up), release a held one
  // (admitted again as a new submission would be, or refused with what would do). A job waiting
  // on its dependencies cannot be held (the server refuses): no button.
  Libra.holdButton = function (j) {
    if (j.state === "PENDING" && !j.start_time && !j.waiting) {
      return Libra.h("button", {
        type: "button", "aria-label": "Hold job " + j.id, class: "hold",
        onclick: function () {
          Libra.post("/api/jobs/" + j.id + "/hold").then(function (r) {
            Libra.announce("Job " + r.id + " is " + r.state + ": its promise and its hold are given up until you release it.");
          }).catch(function (e) { Libra.announce(String(e)); });
        },
      }, "Hold");
    }
    if (j.state === "HELD") {
      return Libra.h("button", {
        type: "button", "aria-label": "Release job " + j.id, class: "release",
        onclick: function () {
          Libra.post("/api/jobs/" + j.id + "/release").then(function (a) {
            Libra.announce(Libra.changeAnswer(a.accepted ? "released" : "release", a));
          }).catch(function (e) { Libra.announce(String(e)); });
        },
      }, "Release");
    }
    return null;
  };

  var last = null;
  var HEAD = ["Job", "Name or command", "State", "Node", "Share (CPU)", "Progress", "To deadline", "Cost", "Actions"];

  Libra.views.jobs = {
    show: function () { last = null; },
    refresh: function () {
      return Libra.get("/api/jobs?limit=200").then(function (jobs) {
        // Times to deadline move every second, so compare the data, not the rendering.
        var key = JSON.stringify(jobs) + Math.floor(Date.now() / 2000);
        if (key === last) return;
        last = key;
        var active = document.activeElement && document.activeElement.getAttribute("aria-label");
        var rows = jobs.map(function (j) {
          return Libra.jobCells(j, [
            Libra.isActive(j.state) ? Libra.cancelButton(j, "/api/jobs/" + j.id + "/cancel") : null,
            Libra.holdButton(j),
            Libra.isActive(j.state) ? Libra.h("a", { href: "#job/" + j.id, "aria-label": "Change job " + j.id }, "Change") : null,
            Libra.h("a", { href: "#job/" + j.id, "aria-label": "Output of job " + j.id }, "Output"),
          ]);
        });
        var box = document.getElementById("jobs-table");
        Libra.replace(box, Libra.table("Your jobs, newest first", HEAD, rows,
          "No jobs yet. Submit one from the Submit page."));
        Libra.refocus(box, active);
      });
    },
  };

  // Put focus back on the control with the same label after a table was rebuilt.
  Libra.refocus = function (box, label) {
    if (!label) return;
    var again = box.querySelector('[aria-label="' + label.replace(/"/g, "") + '"]');
    if (again) again.focus();
  };
})();
