// Command exit0 is the image of the image-pull test: it prints a line and
// exits 0, so that a trainer whose image arrives late completes.
package main

import "fmt"

func main() { fmt.Println("exit0: the image arrived") }
