package main

// version is memsh's release; development builds say -dev.
const version = "0.1.0-dev"
