"use strict";
// Submission with a live quote: every change to the fields asks POST /api/quote (debounced, and
// only the answer to the latest question is shown), so the user sees the price or the reason
// for a refusal before submitting.
Libra.views = Libra.views || {};
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var quoteBox = $("quote");
  var takeBtn = $("take-suggestion");
  var result = $("submit-result");
  var seq = 0;
  var timer = null;
  var suggestion = null;

  // The spec from the fields, or an error naming the field and what it accepts.
  function readSpec() {
    var estimate = Libra.parseDuration($("job-estimate").value);
    if (estimate === null || estimate <= 0) return { error: "Runtime estimate: give a duration such as 90s, 10m or 2h." };
    var deadline = Libra.parseDuration($("job-deadline").value);
    if (deadline === null || deadline <= 0) return { error: "Deadline: give a duration such as 90s, 10m or 2h." };
    var budget = Libra.parseMoney($("job-budget").value);
    if (budget === null || budget < 0) return { error: "Budget: give credits with at most two decimals, e.g. 50 or 12.50." };
    var procs = parseInt($("job-procs").value, 10);
    if (!(procs >= 1)) return { error: "Processors: give a whole number, at least 1." };
    return { spec: { details: { estimate: estimate }, resources: { procs: procs }, qos: { deadline: deadline, budget_cents: budget } } };
  }

  function readCommand() {
    var text = $("job-command").value;
    if ($("kind-script").checked) return text.trim() ? ["sh", "-c", text] : null;
    var words = text.trim().split(/\s+/).filter(Boolean);
    return words.length ? words : null;
  }

  function showSuggestion(s, box) {
    suggestion = s || null;
    takeBtn.hidden = !suggestion;
    if (!suggestion) return;
    Libra.append(box, Libra.h("p", { class: "suggestion" },
      "Suggestion: a deadline of " + Libra.duration(s.deadline) + " (" + Math.ceil(s.deadline) + " s) and a budget of " +
      Libra.money(s.budget_cents) + " credits would be accepted."));
  }

  function showQuote(q) {
    var box = Libra.h("div", { id: "quote-answer", "data-accepted": q.accepted ? "yes" : "no" });
    if (q.accepted) {
      Libra.append(box, Libra.h("p", { class: "ok" },
        "Accepted now at a cost of ", Libra.h("strong", { id: "quote-cost" }, Libra.money(q.cost_cents)),
        " credits on " + q.nodes.join(", ") + ", share " + Libra.num(q.share, 3) + " CPU (policy " + q.policy + ")."));
    } else {
      Libra.append(box, Libra.h("p", { class: "bad" }, "Would be rejected: " + (q.reason || "no reason given") + "."));
    }
    Libra.replace(quoteBox, box);
    showSuggestion(q.accepted ? null : q.suggestion, box);
  }

  function requestQuote() {
    var r = readSpec();
    var my = ++seq;
    if (r.error) { Libra.replace(quoteBox, Libra.h("p", { class: "bad" }, r.error)); showSuggestion(null); return; }
    Libra.post("/api/quote", { spec: r.spec }).then(function (q) {
      if (my === seq) showQuote(q);
    }).catch(function (e) {
      if (my !== seq) return;
      Libra.replace(quoteBox, Libra.h("p", { class: "bad" }, String(e)));
      showSuggestion(null);
    });
  }

  function scheduleQuote() {
    clearTimeout(timer);
    timer = setTimeout(requestQuote, 250);
  }

  ["job-estimate", "job-deadline", "job-budget", "job-procs"].forEach(function (id) {
    $(id).addEventListener("input", scheduleQuote);
  });

  takeBtn.addEventListener("click", function () {
    if (!suggestion) return;
    $("job-deadline").value = Math.ceil(suggestion.deadline) + "s";
    $("job-budget").value = Libra.money(suggestion.budget_cents);
    Libra.announce("Took the suggestion: deadline " + Math.ceil(suggestion.deadline) + " s, budget " + Libra.money(suggestion.budget_cents) + " credits.");
    requestQuote();
    $("job-deadline").focus();
  });

  $("submit-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var r = readSpec();
    var command = readCommand();
    if (r.error) { Libra.replace(result, Libra.h("p", { class: "bad" }, r.error)); return; }
    if (!command) { Libra.replace(result, Libra.h("p", { class: "bad" }, "Command or script: give the program to run.")); return; }
    var name = $("job-name").value.trim();
    var account = $("job-account").value;
    var form = ev.currentTarget;
    var body = { spec: r.spec, command: command, name: name || null, account: account || null };
    Libra.post("/api/jobs", body, Libra.formKey(form)).then(function (j) {
      Libra.formAnswered(form);
      if (j.state === "REJECTED") {
        var box = Libra.h("div", null, Libra.h("p", { class: "bad" }, "Job " + j.id + " was rejected: " + (j.reason || "") + "."));
        Libra.replace(result, box);
        showSuggestion(j.suggestion, box);
        return;
      }
      Libra.replace(result, Libra.h("p", { class: "ok", id: "submitted" },
        "Accepted: ", Libra.h("a", { href: "#job/" + j.id, id: "submitted-link" }, "job " + j.id),
        " on " + j.nodes.join(", ") + ", " + Libra.money(j.cost_cents) + " credits on hold" +
        (j.account ? " against account " + j.account : "") + "."));
      requestQuote();
    }).catch(function (e) {
      Libra.formAnswered(form, e);
      Libra.replace(result, Libra.h("p", { class: "bad" }, String(e)));
    });
  });

  // The accounts the user may charge, their default chosen, each with what is left to them.
  function loadAccounts() {
    var sel = $("job-account");
    return Libra.get("/api/accounts").then(function (all) {
      var keep = sel.value;
      Libra.replace(sel, all.map(function (m) {
        var o = Libra.h("option", { value: m.account.name },
          m.account.name + (m.account.personal ? " (personal)" : "") + ": " + Libra.money(m.available_to_me_cents) + " credits available to you");
        if (keep ? keep === m.account.name : m["default"]) o.selected = true;
        return o;
      }));
    }).catch(function () {});
  }

  Libra.views.submit = {
    show: function () { Libra.replace(result, ""); loadAccounts(); requestQuote(); },
  };
})();
