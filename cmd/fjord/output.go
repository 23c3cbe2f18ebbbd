package main

import (
	"encoding/json"
	"io"

	"github.com/spf13/cobra"
)

// -o json on the list and describe commands is for scripts: one JSON
// document on stdout, its field names snake_case and stable (a new field
// may be added; none is renamed or removed). What the text tables show
// as "-" is null, and offsets are numbers, not strings.

const (
	outputText = "text"
	outputJSON = "json"
)

// addOutputFlag adds -o/--output to cmd, text by default.
func addOutputFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().VarP(newEnumFlag(p, outputText, outputText, outputJSON), "output", "o", "output format: text (tables for people) or json (one document, for scripts)")
}

// commandResult is what a list or describe command found, which prints itself
// as text; its JSON is -o json.
type commandResult interface {
	printText(w io.Writer) error
}

// printResult writes r as -o asks.
func printResult(cmd *cobra.Command, output string, r commandResult) error {
	if output == outputJSON {
		return writeJSON(cmd.OutOrStdout(), r)
	}
	return r.printText(cmd.OutOrStdout())
}

// writeJSON writes v as one indented JSON document and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
