using System.Runtime.CompilerServices;

// The tests check the native struct layouts and pass raw handles.
[assembly: InternalsVisibleTo("LibLlm.Tests")]
