"use strict";
// Users and credit: list with balances, add a user, deposit or withdraw credit.
Libra.views = Libra.views || {};
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var last = null;

  function render(users) {
    Libra.replace($("users-table"), Libra.table("Users", ["User", "Role", "Available", "On hold"], users.map(function (u) {
      return [u.name, u.admin ? "administrator" : "user", Libra.money(u.available_cents), Libra.money(u.held_cents)];
    }), "No users."));
    // Keep the administrator's choice in the credit form across refreshes.
    var sel = $("credit-user"), chosen = sel.value;
    Libra.replace(sel, users.map(function (u) {
      return Libra.h("option", { value: u.name, selected: u.name === chosen }, u.name);
    }));
  }

  $("user-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var body = { name: $("user-name").value.trim(), password: $("user-password").value, admin: $("user-admin").checked };
    Libra.post("/api/admin/users", body).then(function (u) {
      Libra.announce("User " + u.name + " added.");
      $("user-name").value = ""; $("user-password").value = ""; $("user-admin").checked = false;
      last = null;
    }).catch(function (e) { Libra.announce(String(e)); });
  });

  $("credit-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var amount = Libra.parseMoney($("credit-amount").value);
    if (amount === null) { Libra.announce("Amount: give credits with at most two decimals, e.g. 100 or -12.50."); return; }
    var user = $("credit-user").value;
    var form = ev.currentTarget;
    Libra.post("/api/admin/credit", { user: user, amount_cents: amount }, Libra.formKey(form)).then(function (b) {
      Libra.formAnswered(form);
      Libra.announce(user + " now has " + Libra.money(b.available_cents) + " credits available.");
      $("credit-amount").value = "";
      last = null;
    }).catch(function (e) {
      Libra.formAnswered(form, e);
      Libra.announce(String(e));
    });
  });

  Libra.views["admin-users"] = {
    admin: true,
    show: function () { last = null; },
    refresh: function () {
      return Libra.get("/api/admin/users").then(function (users) {
        var key = JSON.stringify(users);
        if (key === last) return;
        last = key;
        render(users);
      });
    },
  };
})();
