"use strict";
// Sweeps hosted by this server (the broker's experiments): a list with progress, money against
// the budget and the projected finish; one sweep in detail with a chart of jobs in execution
// per resource over time, and forms to move its deadline and change its budget. The API decides
// who may see and steer what (the owner or an administrator); the page shows its answer.
Libra.views = Libra.views || {};
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var lastList = null, lastOne = null, lastUsage = null, filled = null, current = null;

  function active(s) { return s.state === "running" || s.state === "paused"; }

  function progress(s) {
    var j = s.jobs, ended = j.done + j.failed;
    var label = ended + " of " + j.total + " jobs" + (j.failed ? " (" + j.failed + " failed)" : "");
    return Libra.h("span", { class: "progress" },
      Libra.h("progress", { max: String(Math.max(j.total, 1)), value: String(ended), "aria-label": "Sweep " + s.id + " progress: " + label }),
      " " + label);
  }

  function money(s) {
    return Libra.money(s.spent_cents) + " of " + Libra.money(s.budget_cents) + " credits" +
      (s.held_cents ? " (" + Libra.money(s.held_cents) + " held)" : "");
  }

  // Times in the server's clock, shown relative to the server's `now`.
  function inTime(s, t) { return Libra.time(t) + " (" + (t >= s.now ? "in " : "") + Libra.duration(Math.abs(t - s.now)) + (t < s.now ? " ago" : "") + ")"; }

  function finish(s) {
    if (s.finished) return "ended " + Libra.time(s.finished);
    if (s.projected_finish) return inTime(s, s.projected_finish);
    return "-";
  }

  function badge(state) { return Libra.h("span", { class: "state state-" + state }, state); }

  function showList(list) {
    var sess = Libra.session();
    // A sweep's state, and the resources whose latest job was refused (its page says why).
    var state = function (s) {
      var refused = (s.resources || []).filter(function (r) { return r.refused; }).map(function (r) { return r.name; });
      return refused.length ? [badge(s.state), Libra.h("span", { class: "bad sweep-list-refused" }, " refused on " + refused.join(", "))] : badge(s.state);
    };
    var key = JSON.stringify(list.map(function (s) { return [s.id, s.state, s.jobs, s.spent_cents, s.held_cents, s.budget_cents, s.deadline, Math.round((s.projected_finish || 0) / 5), (s.resources || []).map(function (r) { return r.refused || ""; })]; }));
    if (key === lastList) return;
    lastList = key;
    var head = ["Sweep", "State", "Progress", "Spent of budget", "Projected finish", "Deadline"];
    if (sess && sess.admin) head.splice(1, 0, "Owner");
    Libra.replace($("sweeps"), Libra.table(sess && sess.admin ? "Every sweep on this server" : "Your sweeps", head,
      list.map(function (s) {
        var row = [Libra.h("a", { href: "#sweep/" + s.id, class: "sweep-link" }, s.id + ": " + s.name), state(s),
          progress(s), money(s), finish(s), inTime(s, s.deadline)];
        if (sess && sess.admin) row.splice(1, 0, s.owner);
        return row;
      }), "No sweeps yet. Start one with libra sweep run ... --server URL."));
  }

  function dl(pairs) {
    return Libra.h("dl", { class: "facts" }, pairs.map(function (p) {
      return [Libra.h("dt", null, p[0]), Libra.h("dd", p[2] ? { id: p[2] } : null, p[1])];
    }));
  }

  function steer(id, action) {
    return Libra.h("button", {
      type: "button", id: "sweep-" + action, "aria-label": action.charAt(0).toUpperCase() + action.slice(1) + " sweep " + id,
      onclick: function () {
        Libra.post("/api/sweeps/" + id + "/" + action).then(function (s) {
          Libra.announce("Sweep " + s.id + " is " + s.state + ".");
          lastOne = null;
          Libra.views.sweep.refresh(String(id));
        }).catch(function (e) { Libra.announce(String(e)); });
      },
    }, action.charAt(0).toUpperCase() + action.slice(1));
  }

  function showOne(s) {
    var j = s.jobs;
    Libra.replace($("h-sweep"), "Sweep " + s.id + ": " + s.name);
    // Each resource whose latest job was refused, and why: what a sweep that makes no progress
    // there waits on (a price below the cluster's, a deadline too close), near the top.
    var refused = s.resources.filter(function (r) { return r.refused; }).map(function (r) {
      var ago = Math.max(0, Math.round(Date.now() / 1000 - r.refused_at));
      return Libra.h("div", { class: "bad" }, r.name + ": its last job was refused " + ago + " s ago: " + r.refused);
    });
    Libra.replace($("sweep-detail"), dl([
      ["State", badge(s.state), "sweep-state"],
      ["Owner", s.owner],
      ["Optimise", s.optimise],
      ["Progress", progress(s), "sweep-progress"],
      ["Jobs", j.done + " done, " + j.failed + " failed, " + j.running + " running, " + j.pending + " pending" + (j.cancelled ? ", " + j.cancelled + " cancelled" : "")],
    ].concat(refused.length ? [["Refused", refused, "sweep-refused"]] : []).concat([
      ["Spent of budget", money(s), "sweep-money"],
      ["Projected finish", finish(s), "sweep-finish"],
      ["Deadline", inTime(s, s.deadline), "sweep-deadline-at"],
      ["Started", Libra.time(s.created)],
    ])));
    var buttons = [];
    if (s.state === "running") buttons.push(steer(s.id, "pause"));
    if (s.state === "paused" || s.state === "stalled") buttons.push(steer(s.id, "resume"));
    if (s.state !== "done" && s.state !== "cancelled") buttons.push(steer(s.id, "cancel"));
    if (j.failed || (s.state === "cancelled" && j.cancelled)) buttons.push(steer(s.id, "rerun"));
    Libra.replace($("sweep-actions"), buttons);
    Libra.replace($("sweep-resources"), Libra.table("Resources", ["Resource", "Kind", "Slots", "Price/CPU-s", "Done", "Failed", "Running", "Spent", "s/job"],
      s.resources.map(function (r) {
        return [r.name, r.kind, String(r.slots), String(r.price), String(r.done), String(r.failed), String(r.running),
          Libra.money(r.spent_cents), r.secs_per_job === null || r.secs_per_job === undefined ? "-" : Libra.num(r.secs_per_job, 3)];
      }), "No resources."));
    // Fill the budget field once per sweep, never while someone may be typing in it.
    if (filled !== s.id) {
      filled = s.id;
      $("sweep-budget").value = Libra.money(s.budget_cents);
      $("sweep-deadline").value = "";
    }
  }

  function showUsage(u, s) {
    var key = JSON.stringify(u.points) + (active(s) ? Math.floor(u.now / 5) : "");
    if (key === lastUsage) return;
    lastUsage = key;
    var series = u.resources.map(function (name, k) {
      return { name: name, points: u.points.map(function (p) { return [p.t, p.running[k]]; }) };
    });
    var peak = u.resources.map(function (name, k) {
      return name + " up to " + Math.max.apply(null, [0].concat(u.points.map(function (p) { return p.running[k]; })));
    }).join("; ");
    var end = s.finished || u.now;
    Libra.replace($("sweep-chart"), [
      Libra.multiStepChart({
        id: "sweep-usage-svg", series: series, start: u.start, end: end,
        title: "Jobs in execution per resource, sweep " + u.id,
        desc: u.points.length ? "Jobs running at once: " + peak + "." : "No job has started yet.",
        empty: "No job has started yet.", xLabel: "time", integer: true, format: function (v) { return Libra.num(v, 0); },
      }),
      Libra.h("ul", { class: "legend", "aria-label": "Resources in the chart" }, u.resources.map(function (name, k) {
        return Libra.h("li", null, Libra.h("span", { class: "swatch seg-" + (k % 8), "aria-hidden": "true" }), name);
      })),
    ]);
  }

  Libra.views.sweeps = {
    show: function () { lastList = null; Libra.replace($("sweeps"), Libra.h("p", null, "Asking the server for sweeps...")); },
    refresh: function () {
      var s = Libra.session();
      return Libra.get("/api/sweeps" + (s && s.admin ? "?all=true" : "")).then(showList).catch(function (e) {
        lastList = null;
        Libra.replace($("sweeps"), Libra.h("p", { class: "bad" }, String(e)));
      });
    },
  };

  Libra.views.sweep = {
    show: function (id) {
      lastOne = lastUsage = filled = null;
      current = id;
      Libra.replace($("h-sweep"), "Sweep " + id);
      ["sweep-error", "sweep-detail", "sweep-actions", "sweep-chart", "sweep-resources"].forEach(function (x) { Libra.replace($(x), ""); });
    },
    refresh: function (id) {
      if (!/^\d+$/.test(id)) { Libra.replace($("sweep-error"), "No such sweep: give a sweep number, as in #sweep/3."); return; }
      return Libra.get("/api/sweeps/" + id).then(function (s) {
        Libra.replace($("sweep-error"), "");
        var key = JSON.stringify(s).replace(/"now":[0-9.]+/, "") + Math.floor(s.now / 2);
        if (key !== lastOne) { lastOne = key; showOne(s); }
        return Libra.get("/api/sweeps/" + id + "/usage").then(function (u) { showUsage(u, s); });
      }).catch(function (e) {
        Libra.replace($("sweep-error"), "Sweep " + id + ": " + String(e));
        ["sweep-detail", "sweep-actions", "sweep-chart", "sweep-resources"].forEach(function (x) { Libra.replace($(x), ""); });
        lastOne = lastUsage = null;
      });
    },
  };

  function after(what) {
    return function (s) {
      Libra.announce("Sweep " + s.id + ": " + what(s) + ".");
      lastOne = null;
      Libra.views.sweep.refresh(String(s.id));
    };
  }
  function fail(e) { Libra.announce(String(e)); }

  $("sweep-deadline-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var secs = Libra.parseDuration($("sweep-deadline").value);
    if (!secs) { fail("New deadline: give a duration from now, e.g. 90s, 30m, 2h or 1d."); return; }
    Libra.post("/api/sweeps/" + current + "/deadline", { deadline_in: secs })
      .then(after(function (s) { return "deadline " + Libra.time(s.deadline) + ", " + s.state; })).catch(fail);
  });

  $("sweep-budget-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var cents = Libra.parseMoney($("sweep-budget").value);
    if (cents === null || cents < 0) { fail("New budget: give credits with at most two decimals, e.g. 500 or 12.50."); return; }
    Libra.post("/api/sweeps/" + current + "/budget", { budget_cents: cents })
      .then(after(function (s) { return "budget " + Libra.money(s.budget_cents) + " credits, " + s.state; })).catch(fail);
  });
})();
