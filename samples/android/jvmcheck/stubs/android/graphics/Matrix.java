package android.graphics; public class Matrix { public boolean postRotate(float d) { return true; } }
