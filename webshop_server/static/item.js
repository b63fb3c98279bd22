// Choosing an option reloads the item page with that option selected (its URL is in data-url).
document.querySelectorAll('input[type="radio"]').forEach(function (radio) {
  radio.addEventListener("click", function () { window.location.href = radio.dataset.url; });
});
