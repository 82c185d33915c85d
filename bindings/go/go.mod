module humming.dev/humming

go 1.19
