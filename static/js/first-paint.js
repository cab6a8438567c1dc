// Before first paint (loaded without defer in <head>): mark JS on, so charts replace their
// text fallback, and apply a stored theme choice, so neither flashes. A file, not an inline
// script: the Content-Security-Policy allows scripts from this site only (app/security.py).
document.documentElement.classList.add("js");
try {
  var storedTheme = localStorage.getItem("lab-theme");
  if (storedTheme) document.documentElement.dataset.theme = storedTheme;
} catch (e) { /* storage disabled: the default theme */ }
