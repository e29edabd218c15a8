return {
  family = "bad_syntax",
  version = = 1,
}
